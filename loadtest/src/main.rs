//! steer-swarm: a bot-swarm load tester for steerd.
//!
//! ```text
//! steer-swarm --url ws://127.0.0.1:8080/ws --world demo --bots 1000 --ramp 10s --duration 60s \
//!     --commands-per-sec 1 --aoi 100x100 --format binary --report out.json \
//!     --fail-if 'p99_cmd_rtt_ms>100,disconnects>0,decode_errors>0'
//! ```
//!
//! Each bot is a tokio task on one runtime (see `bot.rs`); handshakes are bounded by a
//! semaphore; everything stops at `--duration`, or earlier at SIGTERM or SIGINT (`stop.rs`),
//! plus a few seconds of bounded goodbye. The report is printed as a table and optionally
//! written as JSON; `--status FILE` keeps the run's live status there (`status.rs`);
//! `--fail-if` makes the exit status non-zero when a threshold is crossed (exit code 2; 1 is a
//! usage or runtime error).
//!
//! Fan-out figures (issue 16): `--whole-world` subscribes every bot to the whole world,
//! `--passive 0.9` makes 90 % of the bots receive-only, and the report's window figures
//! (after `--warmup`) give server CPU-µs per subscriber per tick, bytes per moving agent and
//! join bytes per agent. `steer-swarm --fit a.json b.json …` fits server CPU-µs per tick over
//! subscribers across reports (see `scripts/fanout-figures.sh`).

#[cfg(all(target_os = "linux", not(target_feature = "crt-static")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod bot;
mod clock;
mod follow;
mod metrics;
mod report;
mod stats;
mod status;
mod stop;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use steer_proto::Encoding;

use crate::bot::{BotConfig, CommandMix};
use crate::report::{Pct, Report, Threshold};
use crate::stats::{C, H, Stats};
use crate::status::Status;
use crate::stop::Stop;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// bincode in binary frames.
    Binary,
    /// JSON in text frames.
    Json,
}

/// Bot-swarm load tester for steerd: many WebSocket clients that subscribe, verify every
/// frame, command their own agents, and measure latency, lateness and throughput.
#[derive(Debug, Parser)]
#[command(
    name = "steer-swarm",
    version,
    after_help = "The run ends at --duration, or earlier at SIGTERM or SIGINT (Ctrl-C): the bots stop sending, despawn their agents and close with 1000, and the report is printed and written as at the deadline. A second signal quits at once (exit 130, no report)."
)]
struct Cli {
    /// The server's WebSocket URL.
    #[arg(long, default_value = "ws://127.0.0.1:8080/ws")]
    url: String,
    /// World to subscribe to and command in.
    #[arg(long, default_value = "demo")]
    world: String,
    /// Number of bots (connections).
    #[arg(long, default_value_t = 10)]
    bots: usize,
    /// Spread bot starts evenly over this time (e.g. `10s`, `500ms`).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    ramp: Duration,
    /// Run time from the first bot's start; every bot stops then (or earlier at SIGTERM or
    /// SIGINT).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Commands per second per bot, sent to the bot's own agents (see --command-mix); 0 = none.
    #[arg(long, default_value_t = 1.0)]
    commands_per_sec: f64,
    /// Which commands: `mixed` (3 MoveTo : 1 add/remove behaviour), `move-to`, `behaviors`.
    #[arg(long, value_enum, default_value_t = CommandMix::Mixed)]
    command_mix: CommandMix,
    /// Agents each bot spawns (inside its area) and commands; 0 = none (no commands then).
    #[arg(long, default_value_t = 1)]
    spawn_per_bot: u32,
    /// Subscription area per bot, `WxH` world units, placed at random.
    #[arg(long, default_value = "100x100", value_parser = parse_aoi)]
    aoi: (f32, f32),
    /// Every bot subscribes to the whole world instead of its `--aoi` area (active bots still
    /// spawn inside a random `--aoi` area).
    #[arg(long)]
    whole_world: bool,
    /// Share of passive bots, 0 to 1 (e.g. 0.9): they only receive, decode, verify chains and
    /// checksums and count; they spawn nothing and send no commands, pans or (but for the
    /// first 4 bots) pings.
    #[arg(long, default_value_t = 0.0)]
    passive: f64,
    /// Bots (but the first 4, which still verify) only skim: of each `cells` message they read
    /// the head (tick, length) and count its bytes, tick and lateness, without decoding,
    /// applying or verifying it; receive-and-count load, so one box carries more subscribers.
    /// Active bots still spawn, command, pan and ping (command-to-effect latency comes from
    /// the first 4). Binary frames only.
    #[arg(long)]
    skim: bool,
    /// Start of the measured window (server CPU per subscriber, bytes per moving agent) after
    /// the first bot's start [default: --ramp + 3s, at most half of --duration].
    #[arg(long, value_parser = parse_duration)]
    warmup: Option<Duration>,
    /// Instead of a run: read these JSON reports and print (JSON) the least-squares line of
    /// server CPU-µs per tick over window subscribers; its slope is CPU-µs per subscriber per
    /// tick.
    #[arg(long, num_args = 1.., value_name = "REPORT")]
    fit: Vec<PathBuf>,
    /// Move each bot's area by up to a quarter of its size this often (off by default).
    #[arg(long, value_parser = parse_duration)]
    pan_every: Option<Duration>,
    /// Frame encoding.
    #[arg(long, value_enum, default_value_t = Format::Binary)]
    format: Format,
    /// With binary frames, ask for batches (`?batch=1`: one WebSocket message per tick instead
    /// of one per AOI cell). `--batch false` measures the unbatched path.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    batch: bool,
    /// Admin token sent in Hello (needed for Spawn when the server has one).
    #[arg(long, env = "STEER_SWARM_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Seed of the bots' random choices (areas, targets, timings).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Ping interval per bot after the initial burst (clock estimate, RTT).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    ping_every: Duration,
    /// Most WebSocket handshakes in flight at once.
    #[arg(long, default_value_t = 64)]
    max_handshakes: usize,
    /// Timeout of connect + Hello → Welcome.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// Prometheus endpoint of the server [default: derived from --url, `/metrics`]; `none`
    /// skips scraping.
    #[arg(long)]
    metrics_url: Option<String>,
    /// PID of a local server to sample CPU and RSS from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Write the report as JSON here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the run's live status here as JSON (counters and per-bot figures), rewritten whole
    /// every 500 ms and once at the end: a script can watch it and stop the run (SIGTERM)
    /// once what it waits for has happened.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
    /// Fail (exit 2) when any condition holds, e.g.
    /// `p99_cmd_rtt_ms>100,disconnects>0,decode_errors>0`.
    #[arg(long)]
    fail_if: Option<String>,
    /// No progress display and no table (the JSON report and failures are still written).
    #[arg(long)]
    quiet: bool,
    /// Worker threads of the runtime [default: number of CPUs].
    #[arg(long)]
    threads: Option<usize>,
}

/// `1.5s`, `250ms`, `2m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("`{s}`: expected a number with a unit (ms, s, m, h)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=7.0 * 86400.0).contains(&secs) {
        return Err(format!("`{s}`: out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `100x100` → (100, 100).
fn parse_aoi(s: &str) -> Result<(f32, f32), String> {
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(|| format!("`{s}`: expected WxH, e.g. 100x100"))?;
    let p = |v: &str| v.trim().parse::<f32>().ok().filter(|x| x.is_finite() && *x > 0.0);
    match (p(w), p(h)) {
        (Some(w), Some(h)) => Ok((w, h)),
        _ => Err(format!("`{s}`: width and height must be positive numbers")),
    }
}

/// The URL a bot connects to: JSON needs `format=json` in the query (the server picks the
/// frame encoding from it, not from `Hello.encoding`); batched binary frames need `batch=1`.
fn bot_url(url: &str, format: Format, batch: bool) -> String {
    let param = match format {
        Format::Binary if batch && !url.contains("batch=") => "batch=1",
        Format::Json if !url.contains("format=json") => "format=json",
        _ => return url.to_string(),
    };
    format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' })
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(0) => {}
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("steer-swarm: {e:#}");
            std::process::exit(1);
        }
    }
}

/// `--fit`: the line through the reports' (window subscribers, server CPU-µs per tick).
fn fit(paths: &[PathBuf]) -> anyhow::Result<serde_json::Value> {
    let mut points = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", p.display()))?;
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        match (field("window_subscribers"), field("server_cpu_us_per_tick")) {
            (Some(x), Some(y)) => points.push((x, y)),
            _ => bail!("{}: no window_subscribers / server_cpu_us_per_tick (a run without a window or server CPU)", p.display()),
        }
    }
    let f = report::linear_fit(&points).context("--fit needs at least two reports with different subscriber counts")?;
    Ok(serde_json::json!({
        "cpu_us_per_subscriber_tick": report::round3(f.slope),
        "cpu_us_per_tick_at_zero": report::round3(f.intercept),
        "r2": report::round3(f.r2),
        "points": points,
    }))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    if !cli.fit.is_empty() {
        println!("{}", serde_json::to_string(&fit(&cli.fit)?)?);
        return Ok(0);
    }
    let thresholds = cli.fail_if.as_deref().map(report::parse_fail_if).transpose()?;
    if cli.bots == 0 {
        bail!("--bots must be at least 1");
    }
    if !cli.commands_per_sec.is_finite() || cli.commands_per_sec < 0.0 || cli.commands_per_sec > 1000.0 {
        bail!("--commands-per-sec must be between 0 and 1000");
    }
    if cli.duration.is_zero() {
        bail!("--duration must be positive");
    }
    if cli.ping_every < Duration::from_millis(10) {
        bail!("--ping-every must be at least 10ms");
    }
    if cli.pan_every.is_some_and(|p| p < Duration::from_millis(100)) {
        bail!("--pan-every must be at least 100ms");
    }
    if !(0.0..=1.0).contains(&cli.passive) {
        bail!("--passive must be a share between 0 and 1");
    }
    if cli.skim && cli.format != Format::Binary {
        bail!("--skim needs binary frames (--format binary)");
    }
    if cli.whole_world && cli.pan_every.is_some() {
        bail!("--pan-every has nothing to move with --whole-world");
    }
    if !(cli.url.starts_with("ws://") || cli.url.starts_with("wss://")) {
        bail!("--url must be a ws:// or wss:// URL");
    }
    let metrics_url = match cli.metrics_url.as_deref() {
        Some("none") => None,
        Some(u) => Some(u.to_string()),
        None => Some(metrics::metrics_url(&cli.url)?),
    };
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = cli.threads {
        rt.worker_threads(t.max(1));
    }
    let rt = rt.enable_all().build().context("starting the tokio runtime")?;
    let report = rt.block_on(swarm(&cli, metrics_url))?;
    // Bots still in their bounded goodbye are dropped with the runtime.
    rt.shutdown_timeout(Duration::from_secs(1));

    if !cli.quiet {
        print!("{}", report.table());
    }
    if let Some(path) = &cli.report {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(judge(&report, thresholds.as_deref()))
}

/// Prints crossed thresholds; the exit code.
fn judge(report: &Report, thresholds: Option<&[Threshold]>) -> i32 {
    let Some(t) = thresholds else { return 0 };
    for m in report::unmeasured(report, t) {
        eprintln!("steer-swarm: --fail-if {m}: no samples in this run (not checked)");
    }
    let failed = report::check(report, t);
    for f in &failed {
        eprintln!("steer-swarm: FAIL {f}");
    }
    if failed.is_empty() { 0 } else { 2 }
}

async fn swarm(cli: &Cli, metrics_url: Option<String>) -> anyhow::Result<Report> {
    let stats = Arc::new(Stats::new(cli.bots));
    // The path is checked before any bot starts: a bad one is a usage error, not a lost run.
    if let Some(p) = &cli.status {
        Status::of(&stats, cli.bots, 0.0, false, false).write(p)?;
    }
    let scrape_before = match &metrics_url {
        Some(u) => match metrics::scrape(u).await {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("steer-swarm: cannot scrape {u}: {e:#} (server tick figures left out)");
                None
            }
        },
        None => None,
    };
    let own_pid = std::process::id();
    let usage = |pid: Option<u32>| pid.and_then(metrics::proc_usage);
    let (server0, swarm0) = (usage(cli.server_pid), usage(Some(own_pid)));

    let start = tokio::time::Instant::now();
    let stop = Stop::new(start + cli.duration);
    stop::on_signals(stop.clone(), cli.quiet)?;
    let cfg = Arc::new(bot_config(cli, Instant::now(), stop.clone(), stats.clone()));
    if cli.commands_per_sec > 0.0 && cli.spawn_per_bot == 0 && !cli.quiet {
        eprintln!("steer-swarm: --spawn-per-bot 0: bots own no agents, so they send no commands");
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..cli.bots {
        let cfg = cfg.clone();
        let at = start + cli.ramp.mul_f64(i as f64 / cli.bots as f64);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            bot::run(cfg, i).await;
        });
    }

    let watched = watch(cli, &stats, metrics_url.as_deref(), start, &stop).await;
    let measured = start.elapsed().as_secs_f64();
    let (server1, swarm1) = (usage(cli.server_pid), usage(Some(own_pid)));
    let scrape_after = match &metrics_url {
        Some(u) => metrics::scrape(u).await.ok(),
        None => None,
    };
    let window = watched.window.map(|(at, cpu0, scrape0)| {
        let secs = at.elapsed().as_secs_f64();
        let cpu = cpu0.zip(server_cpu_now(cli, scrape_after.as_ref())).map(|(a, b)| b - a);
        let ticks = scrape_after.as_ref().zip(scrape0.as_ref()).map(|(b, a)| b.since(a).tick_count);
        let samples = &watched.subscriber_samples;
        let subs = (!samples.is_empty()).then(|| samples.iter().sum::<u64>() as f64 / samples.len() as f64);
        Window { secs, cpu, ticks, subscribers: subs }
    });
    watched.bar.set_message("stopping: bots despawn their agents and close");
    // Bots finish their goodbye within ~2 s of the run's end; abort stragglers.
    let drain = tokio::time::timeout(Duration::from_secs(5), async { while tasks.join_next().await.is_some() {} }).await;
    if drain.is_err() {
        tasks.abort_all();
    }
    watched.bar.finish_and_clear();
    if let Some(p) = &cli.status
        && let Err(e) = Status::of(&stats, cli.bots, start.elapsed().as_secs_f64(), true, true).write(p)
    {
        eprintln!("steer-swarm: {e:#}");
    }

    let cpu = |a: Option<(f64, u64)>, b: Option<(f64, u64)>| match (a, b) {
        (Some(a), Some(b)) => Some(report::round3((b.0 - a.0) / measured * 100.0)),
        _ => None,
    };
    let server = scrape_after.zip(scrape_before).map(|(a, b)| a.since(&b));
    let mut r = build_report(cli, &stats, measured, server.as_ref().and_then(|s| s.tick_mean()).map_or(0.0, |s| s * 1e3));
    server_figures(&mut r, server.as_ref());
    r.server_cpu_pct = cpu(server0, server1);
    r.swarm_cpu_pct = cpu(swarm0, swarm1);
    let mib = |b: u64| (b > 0).then(|| report::round3(b as f64 / (1 << 20) as f64));
    r.server_rss_mib = mib(watched.peak_rss.0);
    r.swarm_rss_mib = mib(watched.peak_rss.1);
    r.passive_bots = (cli.bots - cfg.active_bots) as u64;
    r.skim = cli.skim;
    r.whole_world = cli.whole_world;
    if let Some(w) = &window {
        window_figures(&mut r, w);
    }
    if !cli.quiet {
        if window.is_some() && r.window_server_cpu_s.is_none() {
            eprintln!("steer-swarm: no server CPU figure (give --server-pid, or a server whose /metrics has process_cpu_seconds_total)");
        }
        if server.is_none() && metrics_url.is_some() {
            eprintln!("steer-swarm: no /metrics scrape after the run (server tick figures left out)");
        }
        let (n, notes) = stats.notes();
        if n > 0 {
            eprintln!("steer-swarm: {n} diagnostics, the first {}:", notes.len());
            for m in notes {
                eprintln!("  {m}");
            }
        }
    }
    Ok(r)
}

/// What every bot is told: the command line's settings, the run's clock and the shared stats.
fn bot_config(cli: &Cli, epoch: Instant, stop: Stop, stats: Arc<Stats>) -> BotConfig {
    let warmup = warmup(cli);
    BotConfig {
        url: bot_url(&cli.url, cli.format, cli.batch),
        world: cli.world.clone(),
        aoi: cli.aoi,
        whole_world: cli.whole_world,
        bots: cli.bots,
        active_bots: active_count(cli.bots, cli.passive),
        skim: cli.skim,
        window_ns: if warmup < cli.duration { warmup.as_nanos() as u64 } else { u64::MAX },
        encoding: match cli.format {
            Format::Binary => Encoding::Binary,
            Format::Json => Encoding::Json,
        },
        batch: cli.batch && cli.format == Format::Binary,
        spawn_per_bot: cli.spawn_per_bot,
        token: cli.admin_token.clone(),
        commands_per_sec: cli.commands_per_sec,
        mix: cli.command_mix,
        pan_every: cli.pan_every,
        ping_every: cli.ping_every,
        connect_timeout: cli.connect_timeout,
        request_timeout: Duration::from_secs(10),
        stall_timeout: Duration::from_secs(10),
        effect_timeout: Duration::from_secs(5),
        seed: cli.seed,
        epoch,
        stop,
        handshakes: Arc::new(tokio::sync::Semaphore::new(cli.max_handshakes.max(1))),
        stats,
        clock: std::sync::OnceLock::new(),
    }
}

/// What [`watch`] saw until the run ended.
struct Watched {
    bar: ProgressBar,
    /// Peak resident set of the server and of the swarm, bytes.
    peak_rss: (u64, u64),
    /// The measured window: when it began, the server's CPU-seconds and metrics then.
    window: Option<(Instant, Option<f64>, Option<metrics::Scrape>)>,
    /// Subscriber counts sampled in the window.
    subscriber_samples: Vec<u64>,
}

/// The server's CPU-seconds now: from its process (`--server-pid`) or its `/metrics`.
fn server_cpu_now(cli: &Cli, scrape: Option<&metrics::Scrape>) -> Option<f64> {
    match cli.server_pid {
        Some(pid) => metrics::proc_usage(pid).map(|u| u.0),
        None => scrape.and_then(|s| s.process_cpu_s),
    }
}

/// Live display, resource sampling and `--status` every 500 ms until the run ends; the
/// measured window opens after the warm-up.
async fn watch(cli: &Cli, stats: &Stats, metrics_url: Option<&str>, start: tokio::time::Instant, stop: &Stop) -> Watched {
    let deadline = start + cli.duration;
    let window_at = start + warmup(cli);
    let own_pid = std::process::id();
    let mut w = Watched { bar: progress(cli), peak_rss: (0, 0), window: None, subscriber_samples: Vec::new() };
    let mut last = (Instant::now(), [0u64; 5]);
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut status_failed = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.until() => {}
        }
        let ended = stop.done();
        if w.window.is_none() && tokio::time::Instant::now() >= window_at && window_at < deadline {
            let scrape = match metrics_url {
                Some(u) => metrics::scrape(u).await.ok(),
                None => None,
            };
            w.window = Some((Instant::now(), server_cpu_now(cli, scrape.as_ref()), scrape));
        }
        // Not at the end itself: bots are leaving then.
        if w.window.is_some() && !ended {
            w.subscriber_samples.push(stats.get(C::Subscribed));
        }
        if let Some((_, rss)) = cli.server_pid.and_then(metrics::proc_usage) {
            w.peak_rss.0 = w.peak_rss.0.max(rss);
        }
        if let Some((_, rss)) = metrics::proc_usage(own_pid) {
            w.peak_rss.1 = w.peak_rss.1.max(rss);
        }
        let now = [C::Frames, C::BytesIn, C::CommandsSent, C::Disconnects, C::DecodeErrors].map(|c| stats.get(c));
        let dt = last.0.elapsed().as_secs_f64().max(1e-3);
        let rate = |i: usize| (now[i] - last.1[i]) as f64 / dt;
        let errors = stats.get(C::DecodeErrors) + stats.get(C::ChecksumErrors) + stats.get(C::ChainBreaks) + stats.get(C::CommandErrors);
        w.bar.set_position(start.elapsed().as_secs().min(cli.duration.as_secs()));
        w.bar.set_message(format!(
            "bots {}/{} | {:.0} frames/s | {:.2} MB/s in | {:.0} cmd/s | errors {} | disconnects {}",
            stats.get(C::BotsOnline),
            cli.bots,
            rate(0),
            rate(1) / 1e6,
            rate(2),
            errors,
            stats.get(C::Disconnects),
        ));
        last = (Instant::now(), now);
        if let Some(p) = &cli.status
            && let Err(e) = Status::of(stats, cli.bots, start.elapsed().as_secs_f64(), ended, false).write(p)
            && !std::mem::replace(&mut status_failed, true)
        {
            eprintln!("steer-swarm: {e:#} (said once; the status file may be stale)");
        }
        if ended {
            return w;
        }
    }
}

/// The server's tick figures over the run (the difference of two `/metrics` scrapes).
fn server_figures(r: &mut Report, server: Option<&metrics::Scrape>) {
    let Some(s) = server else { return };
    r.server_tick_ms_p50 = s.tick_quantile(0.5).map(|v| report::round3(v * 1e3));
    r.server_tick_ms_p99 = s.tick_quantile(0.99).map(|v| report::round3(v * 1e3));
    r.server_tick_ms_mean = s.tick_mean().map(|v| report::round3(v * 1e3));
    r.server_ticks = Some(s.tick_count);
    r.server_overruns = Some(s.overruns);
    r.server_frames_dropped = Some(s.frames_dropped);
}

/// The measured window's raw figures.
struct Window {
    secs: f64,
    /// Server CPU-seconds.
    cpu: Option<f64>,
    /// Server ticks.
    ticks: Option<f64>,
    /// Mean subscribed bots.
    subscribers: Option<f64>,
}

/// Fills the report's window figures from `w` and the window counters already in `r`.
fn window_figures(r: &mut Report, w: &Window) {
    let r3 = report::round3;
    r.window_s = Some(r3(w.secs));
    r.window_subscribers = w.subscribers.map(r3);
    r.window_server_ticks = w.ticks;
    r.window_server_cpu_s = w.cpu.map(r3);
    r.window_server_cpu_pct = w.cpu.filter(|_| w.secs > 0.0).map(|c| r3(c / w.secs * 100.0));
    r.server_cpu_us_per_tick = w.cpu.zip(w.ticks).filter(|&(_, t)| t > 0.0).map(|(c, t)| r3(c * 1e6 / t));
    r.server_cpu_us_per_subscriber_tick = match (w.cpu, w.subscribers, w.ticks) {
        (Some(c), Some(s), Some(t)) => report::cpu_us_per_subscriber_tick(c, s, t).map(r3),
        _ => None,
    };
    r.bytes_per_moving_agent = report::per_moving_agent(r.window_bytes_in, r.window_moved_agents).map(r3);
    r.bytes_per_subscriber_tick = (r.window_ticks_seen > 0).then(|| r3(r.window_bytes_in as f64 / r.window_ticks_seen as f64));
}

/// `--warmup`, or its default: the ramp plus 3 s, at most half the run.
fn warmup(cli: &Cli) -> Duration {
    cli.warmup.unwrap_or_else(|| (cli.ramp + Duration::from_secs(3)).min(cli.duration / 2))
}

/// Active (non-passive) bots of `bots` with a `passive` share.
fn active_count(bots: usize, passive: f64) -> usize {
    let active = (bots as f64 * (1.0 - passive)).round();
    (active.max(0.0) as usize).min(bots)
}

fn progress(cli: &Cli) -> ProgressBar {
    if cli.quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(cli.duration.as_secs()), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(cli.duration.as_secs());
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} {pos}/{len}s {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn build_report(cli: &Cli, s: &Stats, secs: f64, tick_mean_ms: f64) -> Report {
    let g = |c: C| s.get(c);
    let per_sec = |v: u64| report::round3(v as f64 / secs.max(1e-9));
    let mut r = Report {
        url: cli.url.clone(),
        world: cli.world.clone(),
        bots: cli.bots as u64,
        bots_connected: g(C::BotsConnected),
        connect_failures: g(C::ConnectFailures),
        bots_not_started: (cli.bots as u64).saturating_sub(g(C::BotsConnected) + g(C::ConnectFailures)),
        disconnects: g(C::Disconnects),
        close_codes: s.close_codes(),
        duration_s: report::round3(secs),
        frames_received: g(C::Frames),
        keyframes: g(C::Keyframes),
        deltas: g(C::Deltas),
        events: g(C::Events),
        frames_per_sec: per_sec(g(C::Frames)),
        bytes_in: g(C::BytesIn),
        bytes_in_per_sec: per_sec(g(C::BytesIn)),
        bytes_per_agent_update: if g(C::AgentUpdates) > 0 { report::round3(g(C::FrameBytes) as f64 / g(C::AgentUpdates) as f64) } else { 0.0 },
        agent_updates: g(C::AgentUpdates),
        decode_errors: g(C::DecodeErrors),
        checksum_errors: g(C::ChecksumErrors),
        chain_breaks: g(C::ChainBreaks),
        resyncs: g(C::Resyncs),
        pans: g(C::Pans),
        ticks_seen: g(C::TicksSeen),
        tick_gaps: g(C::TickGaps),
        commands_sent: g(C::CommandsSent),
        command_results: g(C::CommandResults),
        commands_per_sec: per_sec(g(C::CommandsSent)),
        command_errors: g(C::CommandErrors),
        command_error_codes: s.error_codes(),
        command_timeouts: g(C::CommandTimeouts),
        server_errors: g(C::ServerErrors),
        agents_spawned: g(C::AgentsSpawned),
        effect_timeouts: g(C::EffectTimeouts),
        negative_lateness: g(C::NegativeLateness),
        window_bytes_in: g(C::WindowBytes),
        window_moved_agents: g(C::WindowMoved),
        window_ticks_seen: g(C::WindowTicks),
        joins: g(C::Joins),
        skimmed_messages: g(C::Skimmed),
        follows: g(C::Follows),
        commanded_after_follow: g(C::CommandedAfterFollow),
        per_bot: s.per_bot(),
        join_bytes_per_agent: report::per_moving_agent(g(C::JoinBytes), g(C::JoinAgents)).map(report::round3),
        join_bytes_per_bot: (g(C::Joins) > 0).then(|| report::round3(g(C::JoinBytes) as f64 / g(C::Joins) as f64)),
        ..Report::default()
    };
    r.bots_commanded_after_follow = report::commanded_after_follow(&r.per_bot);
    s.with_hists(|h| {
        r.connect_ms = Pct::of(h.get(H::ConnectUs), 1e3, 0.0);
        r.cmd_rtt_ms = Pct::of(h.get(H::CmdRttUs), 1e3, 0.0);
        r.cmd_effect_ms = Pct::of(h.get(H::CmdEffectUs), 1e3, 0.0);
        r.frame_delivery_ms = Pct::of(h.get(H::LatenessUs), 1e3, 0.0);
        r.frame_lateness_ms = Pct::of(h.get(H::LatenessUs), 1e3, tick_mean_ms);
        r.lateness_error_bound_ms = Pct::of(h.get(H::ClockErrorUs), 1e3, 0.0);
        r.ping_rtt_ms = Pct::of(h.get(H::PingRttUs), 1e3, 0.0);
        r.bytes_per_frame = Pct::of(h.get(H::FrameBytes), 1.0, 0.0);
        r.tick_interval_ms = Pct::of(h.get(H::TickIntervalUs), 1e3, 0.0);
    });
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        for bad in ["", "s", "10x", "-1s", "1e3s", "9999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_aoi() {
        assert_eq!(parse_aoi("100x100").unwrap(), (100.0, 100.0));
        assert_eq!(parse_aoi("50X20.5").unwrap(), (50.0, 20.5));
        for bad in ["100", "0x10", "ax1", "10x-1", "x"] {
            assert!(parse_aoi(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_url_carries_the_format() {
        assert_eq!(bot_url("ws://h:1/ws", Format::Json, true), "ws://h:1/ws?format=json");
        assert_eq!(bot_url("ws://h:1/ws?a=b", Format::Json, false), "ws://h:1/ws?a=b&format=json");
        assert_eq!(bot_url("ws://h:1/ws", Format::Binary, false), "ws://h:1/ws");
        assert_eq!(bot_url("ws://h:1/ws", Format::Binary, true), "ws://h:1/ws?batch=1");
        assert_eq!(bot_url("ws://h:1/ws?batch=0", Format::Binary, true), "ws://h:1/ws?batch=0");
    }

    #[test]
    fn passive_share_and_warmup() {
        assert_eq!(active_count(1000, 0.9), 100);
        assert_eq!(active_count(10, 0.0), 10);
        assert_eq!(active_count(10, 1.0), 0);
        assert_eq!(active_count(3, 0.5), 2);
        let cli = Cli::try_parse_from(["steer-swarm", "--ramp", "10s", "--duration", "30s", "--whole-world", "--passive", "0.9"]).unwrap();
        assert_eq!(warmup(&cli), Duration::from_secs(13));
        assert!(cli.whole_world && (cli.passive - 0.9).abs() < 1e-12);
        let cli = Cli::try_parse_from(["steer-swarm", "--ramp", "10s", "--duration", "12s"]).unwrap();
        assert_eq!(warmup(&cli), Duration::from_secs(6));
        let cli = Cli::try_parse_from(["steer-swarm", "--warmup", "1s"]).unwrap();
        assert_eq!(warmup(&cli), Duration::from_secs(1));
        for bad in [vec!["--passive", "1.5"], vec!["--passive=-0.1"], vec!["--whole-world", "--pan-every", "1s"], vec!["--skim", "--passive", "0.5", "--format", "json"]] {
            let cli = Cli::try_parse_from(std::iter::once("steer-swarm").chain(bad.iter().copied())).unwrap();
            assert!(run(cli).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn window_figures_divide_by_subscribers_and_ticks() {
        let mut r = Report { window_bytes_in: 8_400_000, window_moved_agents: 1_000_000, window_ticks_seen: 2_000, ..Report::default() };
        // 10 s, 100 subscribers, 200 ticks, 4.56 CPU-s: 4.56e6 / 2e4 = 228 µs per sub·tick.
        window_figures(&mut r, &Window { secs: 10.0, cpu: Some(4.56), ticks: Some(200.0), subscribers: Some(100.0) });
        assert_eq!(r.server_cpu_us_per_subscriber_tick, Some(228.0));
        assert_eq!(r.server_cpu_us_per_tick, Some(22_800.0));
        assert_eq!(r.window_server_cpu_pct, Some(45.6));
        assert_eq!(r.bytes_per_moving_agent, Some(8.4));
        assert_eq!(r.bytes_per_subscriber_tick, Some(4200.0));
        let mut r = Report::default();
        window_figures(&mut r, &Window { secs: 10.0, cpu: None, ticks: Some(200.0), subscribers: Some(100.0) });
        assert_eq!((r.server_cpu_us_per_subscriber_tick, r.bytes_per_moving_agent, r.bytes_per_subscriber_tick), (None, None, None));
    }

    #[test]
    fn fits_reports() {
        let dir = std::env::temp_dir().join(format!("steer-swarm-fit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths = Vec::new();
        for (i, subs) in [1.0, 100.0, 250.0, 500.0].into_iter().enumerate() {
            let r = Report { window_subscribers: Some(subs), server_cpu_us_per_tick: Some(500.0 + 20.0 * subs), ..Report::default() };
            let p = dir.join(format!("{i}.json"));
            std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
            paths.push(p);
        }
        let v = fit(&paths).unwrap();
        assert_eq!(v["cpu_us_per_subscriber_tick"].as_f64(), Some(20.0));
        assert_eq!(v["cpu_us_per_tick_at_zero"].as_f64(), Some(500.0));
        std::fs::write(dir.join("bad.json"), "{}").unwrap();
        assert!(fit(&[paths[0].clone(), dir.join("bad.json")]).is_err());
        assert!(fit(&paths[..1]).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cli_accepts_the_issue_example() {
        let cli = Cli::try_parse_from([
            "steer-swarm", "--url", "ws://127.0.0.1:8080/ws", "--world", "demo", "--bots", "1000", "--ramp", "10s",
            "--duration", "60s", "--commands-per-sec", "1", "--aoi", "100x100", "--format", "binary", "--spawn-per-bot",
            "2", "--admin-token", "t", "--seed", "7", "--pan-every", "5s", "--report", "out.json", "--fail-if",
            "p99_cmd_rtt_ms>100,disconnects>0,decode_errors>0", "--quiet",
        ])
        .unwrap();
        assert_eq!((cli.bots, cli.ramp, cli.aoi, cli.format), (1000, Duration::from_secs(10), (100.0, 100.0), Format::Binary));
        assert_eq!(cli.pan_every, Some(Duration::from_secs(5)));
        assert_eq!(report::parse_fail_if(cli.fail_if.as_deref().unwrap()).unwrap().len(), 3);
    }
}
