//! The end-of-run report: the table, `--report out.json`, and `--fail-if` thresholds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::stats::BotRow;

/// Percentiles of one histogram, in the histogram's unit scaled by the caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Pct {
    /// Samples.
    pub count: u64,
    /// Median (`null` without samples).
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
}

impl Pct {
    /// Percentiles of `h` divided by `scale` (e.g. 1000 for µs → ms), plus `shift`.
    pub fn of(h: &Histogram<u64>, scale: f64, shift: f64) -> Self {
        if h.is_empty() {
            return Pct::default();
        }
        let v = |x: u64| Some(round3(x as f64 / scale + shift));
        Pct {
            count: h.len(),
            p50: v(h.value_at_quantile(0.50)),
            p90: v(h.value_at_quantile(0.90)),
            p99: v(h.value_at_quantile(0.99)),
            max: v(h.max()),
        }
    }
}

/// Rounds to 3 decimals (keeps the JSON readable).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `bytes / moved` (bytes per moving agent), `None` when no agent moved.
pub fn per_moving_agent(bytes: u64, moved: u64) -> Option<f64> {
    (moved > 0).then(|| bytes as f64 / moved as f64)
}

/// Server CPU-µs per subscriber per tick: `cpu_s` CPU-seconds spent while `subscribers`
/// (mean over the window) were fed `ticks` ticks. `None` without subscribers, ticks or a
/// finite, non-negative CPU figure.
pub fn cpu_us_per_subscriber_tick(cpu_s: f64, subscribers: f64, ticks: f64) -> Option<f64> {
    (cpu_s.is_finite() && cpu_s >= 0.0 && subscribers > 0.0 && ticks > 0.0).then(|| cpu_s * 1e6 / (subscribers * ticks))
}

/// A least-squares line `y = intercept + slope · x`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Slope.
    pub slope: f64,
    /// Value at x = 0.
    pub intercept: f64,
    /// Coefficient of determination (1 = every point on the line; 1 also when all y are equal
    /// and on it).
    pub r2: f64,
    /// Points.
    pub n: usize,
}

/// Ordinary least squares over `points` (x, y); `None` with fewer than two distinct x or a
/// non-finite value.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<Fit> {
    if points.len() < 2 || points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sse: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Some(Fit { slope, intercept, r2, n: points.len() })
}

/// Everything the swarm measured. Field names are the JSON keys and, flattened, the
/// `--fail-if` metric names (see [`Report::flat`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// URL attacked.
    pub url: String,
    /// World.
    pub world: String,
    /// Bots asked for.
    pub bots: u64,
    /// Of them passive (`--passive`): they only receive, decode, verify and count.
    pub passive_bots: u64,
    /// Passive bots but the first 4 only skimmed `cells` messages (`--skim`).
    pub skim: bool,
    /// `cells` messages skimmed (head read, bytes, tick and lateness counted; not decoded).
    pub skimmed_messages: u64,
    /// Every bot subscribed to the whole world (`--whole-world`).
    pub whole_world: bool,
    /// Bots that completed Hello → Welcome.
    pub bots_connected: u64,
    /// Bots that never got a Welcome.
    pub connect_failures: u64,
    /// Bots that never got a handshake slot before the run ended (`--max-handshakes`,
    /// `--ramp`, or a server too slow to accept).
    pub bots_not_started: u64,
    /// Connections that ended before the run did.
    pub disconnects: u64,
    /// Disconnects by close code (or `reset`, `stalled`, `error`).
    pub close_codes: BTreeMap<String, u64>,
    /// Seconds measured (first connect attempt → stop).
    pub duration_s: f64,
    /// Keyframes + deltas.
    pub frames_received: u64,
    /// Keyframes.
    pub keyframes: u64,
    /// Deltas.
    pub deltas: u64,
    /// Events.
    pub events: u64,
    /// Frames per second.
    pub frames_per_sec: f64,
    /// All bytes received.
    pub bytes_in: u64,
    /// Bytes received per second.
    pub bytes_in_per_sec: f64,
    /// Bytes per keyframe/delta.
    pub bytes_per_frame: Pct,
    /// Frame bytes / agent records carried (keyframe agents, delta changed + entered).
    pub bytes_per_agent_update: f64,
    /// Agent records carried.
    pub agent_updates: u64,
    /// Frames steer-proto could not decode.
    pub decode_errors: u64,
    /// Checksum mismatches.
    pub checksum_errors: u64,
    /// Deltas that did not chain (resynced).
    pub chain_breaks: u64,
    /// Re-subscriptions after errors.
    pub resyncs: u64,
    /// Area moves.
    pub pans: u64,
    /// Distinct ticks seen, summed over bots.
    pub ticks_seen: u64,
    /// Ticks missed between ticks seen, summed over bots.
    pub tick_gaps: u64,
    /// Follows: times a bot followed its world to another server (`moved`) and resumed there,
    /// summed over bots (a bot that follows twice counts twice; `per_bot` has each bot's).
    pub follows: u64,
    /// Follows after which the bot had a command acknowledged (not an error) on the server it
    /// followed to: it kept its agents and commands them there. Counted per follow, like
    /// `follows` (a bot that follows twice and commands after each counts twice), and never
    /// taken back by a later follow.
    pub commanded_after_follow: u64,
    /// Bots, each counted once, that followed at least once and had a command acknowledged
    /// since their last follow (from `per_bot`). With one follow per bot it equals
    /// `commanded_after_follow`; after several it says which bots command where their world
    /// is now, not where it was.
    pub bots_commanded_after_follow: u64,
    /// Time between the arrivals of consecutive ticks' states at a bot, ms (across a handoff:
    /// its largest sample is the longest pause a client saw).
    pub tick_interval_ms: Pct,
    /// Commands sent (MoveTo, behaviour commands).
    pub commands_sent: u64,
    /// Their results.
    pub command_results: u64,
    /// Commands per second.
    pub commands_per_sec: f64,
    /// Error outcomes (any request).
    pub command_errors: u64,
    /// Error outcomes by code.
    pub command_error_codes: BTreeMap<String, u64>,
    /// Requests without a result within 10 s (commands: or, at the end, older than 1 s).
    pub command_timeouts: u64,
    /// `Error` messages without request id.
    pub server_errors: u64,
    /// Agents the bots spawned.
    pub agents_spawned: u64,
    /// Hello → Welcome (including TCP + WebSocket handshake), ms.
    pub connect_ms: Pct,
    /// Command → CommandResult, ms.
    pub cmd_rtt_ms: Pct,
    /// MoveTo → first frame with the velocity turned toward the target, ms.
    pub cmd_effect_ms: Pct,
    /// MoveTo effects never seen (agent out of view or not turning in time).
    pub effect_timeouts: u64,
    /// Frame arrival − tick due time, ms (publish-time lateness + mean server tick duration).
    pub frame_lateness_ms: Pct,
    /// Frame arrival − estimated publish time of its tick, ms.
    pub frame_delivery_ms: Pct,
    /// How much the lateness may be understated (clock estimate slack, see `clock.rs`), ms.
    pub lateness_error_bound_ms: Pct,
    /// Lateness samples below zero (estimator error), counted as 0.
    pub negative_lateness: u64,
    /// Ping → Pong, ms.
    pub ping_rtt_ms: Pct,
    /// Server tick duration (step only) percentiles from `/metrics`, ms.
    pub server_tick_ms_p50: Option<f64>,
    /// 99th percentile.
    pub server_tick_ms_p99: Option<f64>,
    /// Mean.
    pub server_tick_ms_mean: Option<f64>,
    /// Ticks the server ran during the run.
    pub server_ticks: Option<f64>,
    /// Ticks the server dropped (overruns).
    pub server_overruns: Option<f64>,
    /// Tick frames slow clients skipped (resynced by keyframes).
    pub server_frames_dropped: Option<f64>,
    /// Server CPU use over the run, % of one core (`--server-pid`).
    pub server_cpu_pct: Option<f64>,
    /// Server peak RSS seen, MiB (`--server-pid`).
    pub server_rss_mib: Option<f64>,
    /// The swarm's own CPU use, % of one core.
    pub swarm_cpu_pct: Option<f64>,
    /// Swarm peak RSS seen, MiB.
    pub swarm_rss_mib: Option<f64>,
    /// The measured window (`--warmup` → end), s: the figures below are taken over it, once
    /// the ramp is over and the joins are done. `null` when the run ended before it began.
    pub window_s: Option<f64>,
    /// Bots holding a subscription, mean of 2 samples a second over the window.
    pub window_subscribers: Option<f64>,
    /// Server ticks in the window (from `/metrics`; else window × tick rate).
    pub window_server_ticks: Option<f64>,
    /// Server CPU-seconds in the window (`--server-pid`, else `process_cpu_seconds_total`).
    pub window_server_cpu_s: Option<f64>,
    /// Server CPU in the window, % of one core.
    pub window_server_cpu_pct: Option<f64>,
    /// Server CPU-µs per subscriber per tick in the window: CPU / (subscribers × ticks).
    pub server_cpu_us_per_subscriber_tick: Option<f64>,
    /// Server CPU-µs per tick in the window (the points of `--fit`).
    pub server_cpu_us_per_tick: Option<f64>,
    /// WebSocket payload bytes received in the window, all bots.
    pub window_bytes_in: u64,
    /// Agents that moved (delta `changed` + `entered`) in frames received in the window.
    pub window_moved_agents: u64,
    /// Distinct ticks seen in the window, summed over bots.
    pub window_ticks_seen: u64,
    /// Window bytes / moved agents: bytes on the wire per moving agent per tick.
    pub bytes_per_moving_agent: Option<f64>,
    /// Window bytes / window ticks seen: bytes per subscriber per tick.
    pub bytes_per_subscriber_tick: Option<f64>,
    /// Bots that completed their join (a keyframe of every subscribed cell).
    pub joins: u64,
    /// Bytes from the first Subscribe until then, per agent in those keyframes (summed over
    /// bots before dividing).
    pub join_bytes_per_agent: Option<f64>,
    /// Mean join bytes per bot.
    pub join_bytes_per_bot: Option<f64>,
    /// Each bot's figures, by bot index: follows, commands acknowledged, and those
    /// acknowledged since its last follow.
    pub per_bot: Vec<BotRow>,
}

/// Bots of `rows` that followed their world and had a command acknowledged since.
pub fn commanded_after_follow(rows: &[BotRow]) -> u64 {
    rows.iter().filter(|r| r.follows > 0 && r.acked_since_follow > 0).count() as u64
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

impl Report {
    /// `name → value` for every number: top-level numbers by name; percentile groups as
    /// `NAME.p99` and `p99_NAME`; maps as `NAME.KEY`. `null` values are left out.
    pub fn flat(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        let Ok(serde_json::Value::Object(m)) = serde_json::to_value(self) else { return out };
        for (k, v) in m {
            match v {
                serde_json::Value::Number(n) => {
                    if let Some(x) = n.as_f64() {
                        out.insert(k, x);
                    }
                }
                serde_json::Value::Object(inner) => {
                    let pct = inner.contains_key("p50");
                    for (ik, iv) in inner {
                        if let Some(x) = iv.as_f64() {
                            if pct && ik != "count" {
                                out.insert(format!("{ik}_{k}"), x);
                            }
                            out.insert(format!("{k}.{ik}"), x);
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Every metric name `--fail-if` accepts (including those `null` in this report).
    pub fn metric_names() -> Vec<String> {
        let mut r = Report::default();
        let one = Pct { count: 1, p50: Some(1.0), p90: Some(1.0), p99: Some(1.0), max: Some(1.0) };
        for p in [
            &mut r.bytes_per_frame,
            &mut r.connect_ms,
            &mut r.cmd_rtt_ms,
            &mut r.cmd_effect_ms,
            &mut r.frame_lateness_ms,
            &mut r.frame_delivery_ms,
            &mut r.lateness_error_bound_ms,
            &mut r.ping_rtt_ms,
            &mut r.tick_interval_ms,
        ] {
            *p = one;
        }
        for o in [
            &mut r.server_tick_ms_p50,
            &mut r.server_tick_ms_p99,
            &mut r.server_tick_ms_mean,
            &mut r.server_ticks,
            &mut r.server_overruns,
            &mut r.server_frames_dropped,
            &mut r.server_cpu_pct,
            &mut r.server_rss_mib,
            &mut r.swarm_cpu_pct,
            &mut r.swarm_rss_mib,
            &mut r.window_s,
            &mut r.window_subscribers,
            &mut r.window_server_ticks,
            &mut r.window_server_cpu_s,
            &mut r.window_server_cpu_pct,
            &mut r.server_cpu_us_per_subscriber_tick,
            &mut r.server_cpu_us_per_tick,
            &mut r.bytes_per_moving_agent,
            &mut r.bytes_per_subscriber_tick,
            &mut r.join_bytes_per_agent,
            &mut r.join_bytes_per_bot,
        ] {
            *o = Some(1.0);
        }
        r.flat().into_keys().collect()
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "steer-swarm report: {} world `{}`, {:.1} s", self.url, self.world, self.duration_s);
        let _ = writeln!(s, "{:-<78}", "");
        let row = |s: &mut String, k: &str, v: String| {
            let _ = writeln!(s, "{k:<28} {v}");
        };
        row(&mut s, "bots connected / asked", format!("{} / {} ({} failed to connect, {} never started)", self.bots_connected, self.bots, self.connect_failures, self.bots_not_started));
        let codes: Vec<String> = self.close_codes.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        row(&mut s, "disconnects", format!("{} {}", self.disconnects, if codes.is_empty() { String::new() } else { format!("({})", codes.join(", ")) }));
        row(&mut s, "frames received", format!("{} ({} keyframes, {} deltas), {:.0}/s", self.frames_received, self.keyframes, self.deltas, self.frames_per_sec));
        row(&mut s, "bytes in", format!("{:.2} MB, {:.3} MB/s", self.bytes_in as f64 / 1e6, self.bytes_in_per_sec / 1e6));
        row(&mut s, "bytes per agent update", format!("{:.2} ({} updates)", self.bytes_per_agent_update, self.agent_updates));
        row(&mut s, "errors", format!("decode {}, checksum {}, chain breaks {}, resyncs {}", self.decode_errors, self.checksum_errors, self.chain_breaks, self.resyncs));
        row(&mut s, "ticks seen / gaps", format!("{} / {}", self.ticks_seen, self.tick_gaps));
        if self.follows > 0 {
            row(&mut s, "followed a moved world", format!("{} ({} commanded there; {} of {} bots)", self.follows, self.commanded_after_follow, self.bots_commanded_after_follow, self.bots));
        }
        row(&mut s, "commands", format!("{} sent, {} results, {} errors, {} timeouts, {:.1}/s", self.commands_sent, self.command_results, self.command_errors, self.command_timeouts, self.commands_per_sec));
        if !self.command_error_codes.is_empty() {
            let codes: Vec<String> = self.command_error_codes.iter().map(|(k, v)| format!("{k}×{v}")).collect();
            row(&mut s, "command error codes", codes.join(", "));
        }
        let _ = writeln!(s, "{:-<78}", "");
        let _ = writeln!(s, "{:<28} {:>8} {:>9} {:>9} {:>9} {:>9}", "latency", "count", "p50", "p90", "p99", "max");
        for (name, p) in [
            ("connect ms", &self.connect_ms),
            ("command rtt ms", &self.cmd_rtt_ms),
            ("command → effect ms", &self.cmd_effect_ms),
            ("frame lateness ms (due)", &self.frame_lateness_ms),
            ("frame delivery ms (publish)", &self.frame_delivery_ms),
            ("lateness error bound ms", &self.lateness_error_bound_ms),
            ("ping rtt ms", &self.ping_rtt_ms),
            ("tick interval ms", &self.tick_interval_ms),
            ("bytes per frame", &self.bytes_per_frame),
        ] {
            let _ = writeln!(s, "{name:<28} {:>8} {:>9} {:>9} {:>9} {:>9}", p.count, fmt_opt(p.p50), fmt_opt(p.p90), fmt_opt(p.p99), fmt_opt(p.max));
        }
        let _ = writeln!(s, "{:-<78}", "");
        row(&mut s, "server tick ms", format!("p50 {} p99 {} mean {} ({} ticks, {} overruns, {} frames dropped)", fmt_opt(self.server_tick_ms_p50), fmt_opt(self.server_tick_ms_p99), fmt_opt(self.server_tick_ms_mean), fmt_opt(self.server_ticks), fmt_opt(self.server_overruns), fmt_opt(self.server_frames_dropped)));
        row(&mut s, "server cpu % / rss MiB", format!("{} / {}", fmt_opt(self.server_cpu_pct), fmt_opt(self.server_rss_mib)));
        row(&mut s, "swarm cpu % / rss MiB", format!("{} / {}", fmt_opt(self.swarm_cpu_pct), fmt_opt(self.swarm_rss_mib)));
        let _ = writeln!(s, "{:-<78}", "");
        row(&mut s, "bots passive / mode", format!("{} / {}{}", self.passive_bots, if self.whole_world { "whole world" } else { "own area" }, if self.skim { format!(" (skimming: {} messages skimmed)", self.skimmed_messages) } else { String::new() }));
        row(&mut s, "window s / subscribers", format!("{} / {} ({} server ticks)", fmt_opt(self.window_s), fmt_opt(self.window_subscribers), fmt_opt(self.window_server_ticks)));
        row(&mut s, "server cpu in window", format!("{} % of a core, {} CPU-s", fmt_opt(self.window_server_cpu_pct), fmt_opt(self.window_server_cpu_s)));
        row(&mut s, "server cpu-µs per sub·tick", format!("{} ({} per tick)", fmt_opt(self.server_cpu_us_per_subscriber_tick), fmt_opt(self.server_cpu_us_per_tick)));
        row(&mut s, "bytes per moving agent", format!("{} ({} bytes, {} moved, {} per subscriber·tick)", fmt_opt(self.bytes_per_moving_agent), self.window_bytes_in, self.window_moved_agents, fmt_opt(self.bytes_per_subscriber_tick)));
        row(&mut s, "join bytes per agent", format!("{} ({} joins, {} bytes per join)", fmt_opt(self.join_bytes_per_agent), self.joins, fmt_opt(self.join_bytes_per_bot)));
        row(&mut s, "p99 delivery / lateness ms", format!("{} / {}", fmt_opt(self.frame_delivery_ms.p99), fmt_opt(self.frame_lateness_ms.p99)));
        if self.effect_timeouts > 0 || self.negative_lateness > 0 {
            row(&mut s, "notes", format!("{} MoveTo effects unobserved, {} negative lateness samples", self.effect_timeouts, self.negative_lateness));
        }
        s
    }
}

/// Comparison of a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// One `--fail-if` condition: the run fails when `metric OP value` holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// Flattened metric name (see [`Report::flat`]).
    pub metric: String,
    /// Comparison.
    pub op: Op,
    /// Bound.
    pub value: f64,
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.metric, self.op.symbol(), self.value)
    }
}

/// Parses `p99_cmd_rtt_ms>100,disconnects>0,decode_errors>0` (comma separated; operators
/// `> >= < <= == !=`; metric names checked against [`Report::metric_names`]).
pub fn parse_fail_if(spec: &str) -> anyhow::Result<Vec<Threshold>> {
    let names = Report::metric_names();
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let pos = part.find(['>', '<', '=', '!']).with_context(|| format!("`{part}`: expected METRIC>VALUE (or >=, <, <=, ==, !=)"))?;
        let (metric, rest) = part.split_at(pos);
        let (op, value) = [("<=", Op::Le), (">=", Op::Ge), ("==", Op::Eq), ("!=", Op::Ne), ("<", Op::Lt), (">", Op::Gt)]
            .iter()
            .find_map(|(s, op)| rest.strip_prefix(s).map(|v| (*op, v)))
            .with_context(|| format!("`{part}`: unknown operator"))?;
        let metric = metric.trim();
        if !names.iter().any(|n| n == metric) {
            let close: Vec<&String> = names.iter().filter(|n| n.contains(metric) || metric.contains(n.as_str())).take(5).collect();
            bail!("`{part}`: unknown metric `{metric}`{}", if close.is_empty() { String::new() } else { format!(" (did you mean {close:?}?)") });
        }
        let value: f64 = value.trim().parse().with_context(|| format!("`{part}`: `{}` is not a number", value.trim()))?;
        if !value.is_finite() {
            bail!("`{part}`: the bound must be finite");
        }
        out.push(Threshold { metric: metric.to_string(), op, value });
    }
    if out.is_empty() {
        bail!("--fail-if: no conditions");
    }
    Ok(out)
}

/// The conditions that hold (= failures), as messages. A metric without a value (no
/// samples) does not fail; it is reported by [`unmeasured`].
pub fn check(report: &Report, thresholds: &[Threshold]) -> Vec<String> {
    let flat = report.flat();
    thresholds
        .iter()
        .filter_map(|t| flat.get(&t.metric).filter(|&&v| t.op.holds(v, t.value)).map(|v| format!("{t} (measured {v})")))
        .collect()
}

/// Thresholds whose metric had no value in this run.
pub fn unmeasured(report: &Report, thresholds: &[Threshold]) -> Vec<String> {
    let flat = report.flat();
    thresholds.iter().filter(|t| !flat.contains_key(&t.metric)).map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_per_moving_agent_is_a_ratio_of_sums() {
        // Two ticks: 300 B for 100 moved agents, then 120 B for 20 → 420 / 120, not the mean
        // of 3.0 and 6.0.
        assert_eq!(per_moving_agent(300 + 120, 100 + 20), Some(3.5));
        assert_eq!(per_moving_agent(0, 10), Some(0.0));
        // A world at rest: nothing moved, no figure (not infinity).
        assert_eq!(per_moving_agent(50, 0), None);
    }

    #[test]
    fn cpu_per_subscriber_tick() {
        // 2 CPU-s over 400 ticks (20 s at 20 Hz) feeding 250 subscribers: 2e6 / 1e5 = 20 µs.
        assert!((cpu_us_per_subscriber_tick(2.0, 250.0, 400.0).unwrap() - 20.0).abs() < 1e-9);
        assert!((cpu_us_per_subscriber_tick(0.5, 1.0, 100.0).unwrap() - 5000.0).abs() < 1e-9);
        assert_eq!(cpu_us_per_subscriber_tick(1.0, 0.0, 100.0), None);
        assert_eq!(cpu_us_per_subscriber_tick(1.0, 10.0, 0.0), None);
        assert_eq!(cpu_us_per_subscriber_tick(f64::NAN, 10.0, 10.0), None);
        assert_eq!(cpu_us_per_subscriber_tick(-0.1, 10.0, 10.0), None);
    }

    #[test]
    fn fits_a_line() {
        // y = 300 + 22.8 x exactly.
        let pts: Vec<(f64, f64)> = [1.0, 100.0, 250.0, 500.0].iter().map(|&x| (x, 300.0 + 22.8 * x)).collect();
        let f = linear_fit(&pts).unwrap();
        assert!((f.slope - 22.8).abs() < 1e-9 && (f.intercept - 300.0).abs() < 1e-6, "{f:?}");
        assert!((f.r2 - 1.0).abs() < 1e-12 && f.n == 4);
        // Noisy points: the least-squares line of (0,1), (1,3), (2,2), (3,5) is 1.1 + 1.1 x.
        let f = linear_fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 2.0), (3.0, 5.0)]).unwrap();
        assert!((f.slope - 1.1).abs() < 1e-9 && (f.intercept - 1.1).abs() < 1e-9, "{f:?}");
        // Residuals -0.1, 0.8, -1.3, 0.6: SSE 2.7 of SYY 8.75.
        assert!((f.r2 - (1.0 - 2.7 / 8.75)).abs() < 1e-9, "{f:?}");
        assert!(linear_fit(&[(1.0, 2.0)]).is_none());
        assert!(linear_fit(&[(1.0, 2.0), (1.0, 3.0)]).is_none());
        assert!(linear_fit(&[(1.0, 2.0), (2.0, f64::INFINITY)]).is_none());
    }

    #[test]
    fn parses_thresholds() {
        let t = parse_fail_if("p99_cmd_rtt_ms>100, disconnects>0,decode_errors>=1,bots_connected<50,cmd_rtt_ms.max<=2.5,tick_gaps!=0,chain_breaks==3").unwrap();
        assert_eq!(t.len(), 7);
        assert_eq!(t[0], Threshold { metric: "p99_cmd_rtt_ms".into(), op: Op::Gt, value: 100.0 });
        assert_eq!(t[2].op, Op::Ge);
        assert_eq!(t[3].op, Op::Lt);
        assert_eq!(t[4], Threshold { metric: "cmd_rtt_ms.max".into(), op: Op::Le, value: 2.5 });
        assert_eq!(t[5].op, Op::Ne);
        assert_eq!(t[6].op, Op::Eq);
        assert_eq!(t[0].to_string(), "p99_cmd_rtt_ms>100");
    }

    #[test]
    fn rejects_bad_thresholds() {
        for bad in ["", "disconnects", "nope>1", "disconnects>x", "disconnects=>1", "disconnects>inf", "p99_cmd_rtt>1"] {
            assert!(parse_fail_if(bad).is_err(), "{bad}");
        }
        let e = parse_fail_if("p99_cmd_rtt>1").unwrap_err().to_string();
        assert!(e.contains("p99_cmd_rtt_ms"), "{e}");
    }

    #[test]
    fn knows_every_required_metric() {
        let names = Report::metric_names();
        for n in [
            "bots_connected",
            "disconnects",
            "frames_received",
            "decode_errors",
            "checksum_errors",
            "p50_cmd_rtt_ms",
            "p99_cmd_rtt_ms",
            "max_cmd_rtt_ms",
            "p99_cmd_effect_ms",
            "p99_frame_lateness_ms",
            "frame_lateness_ms.max",
            "bytes_in_per_sec",
            "bytes_per_agent_update",
            "server_tick_ms_p99",
            "tick_gaps",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
    }

    #[test]
    fn checks_thresholds() {
        let mut h = crate::stats::new_hist();
        for v in 1..=100u64 {
            h.record(v * 1000).unwrap();
        }
        let r = Report { disconnects: 2, cmd_rtt_ms: Pct::of(&h, 1000.0, 0.0), ..Report::default() };
        // 3 significant figures: the bucket's highest equivalent value.
        assert!((r.cmd_rtt_ms.p99.unwrap() - 99.0).abs() < 0.1, "{:?}", r.cmd_rtt_ms);
        let t = parse_fail_if("p99_cmd_rtt_ms>100,disconnects>0,decode_errors>0,p99_cmd_effect_ms>1").unwrap();
        let failed = check(&r, &t);
        assert_eq!(failed, vec!["disconnects>0 (measured 2)".to_string()]);
        assert_eq!(unmeasured(&r, &t), vec!["p99_cmd_effect_ms>1".to_string()]);
        let t = parse_fail_if("p99_cmd_rtt_ms>=99").unwrap();
        assert_eq!(check(&r, &t).len(), 1);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["cmd_rtt_ms"]["p99"].as_f64(), r.cmd_rtt_ms.p99);
        assert!(json["cmd_effect_ms"]["p99"].is_null());
        assert!(r.table().contains("command rtt ms"));
    }
}
