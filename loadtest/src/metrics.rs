//! Scrapes the server's Prometheus `/metrics` over plain HTTP/1.1 (no TLS), and samples a
//! local process's CPU time and RSS from `/proc`.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `ws://host:port/anything` → `http://host:port/metrics` (`wss` → `https`).
pub fn metrics_url(ws_url: &str) -> anyhow::Result<String> {
    let (scheme, rest) = ws_url.split_once("://").context("URL without a scheme")?;
    let scheme = match scheme {
        "ws" | "http" => "http",
        "wss" | "https" => "https",
        other => bail!("unsupported URL scheme `{other}`"),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        bail!("URL without a host: {ws_url}");
    }
    Ok(format!("{scheme}://{authority}/metrics"))
}

/// The server figures the swarm reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// `steerd_tick_duration_seconds` buckets: (upper bound s, cumulative count), ascending.
    pub tick_buckets: Vec<(f64, f64)>,
    /// Sum of tick durations, s.
    pub tick_sum: f64,
    /// Number of ticks.
    pub tick_count: f64,
    /// `steerd_tick_overruns_total`.
    pub overruns: f64,
    /// `steerd_frames_dropped_total`.
    pub frames_dropped: f64,
    /// `steerd_bytes_sent_total`.
    pub bytes_sent: f64,
    /// `steerd_connections`.
    pub connections: f64,
    /// `steerd_agents`.
    pub agents: f64,
    /// `process_cpu_seconds_total` (user + system CPU of the server process), if exported.
    pub process_cpu_s: Option<f64>,
}

/// Parses the Prometheus text exposition (only the series above).
pub fn parse(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.rsplit_once(' ') else { continue };
        let Ok(v) = value.trim().parse::<f64>() else { continue };
        let (name, labels) = match key.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (key, ""),
        };
        match name {
            "steerd_tick_duration_seconds_bucket" => {
                let le = labels.split(',').find_map(|kv| kv.trim().strip_prefix("le=")).map(|q| q.trim_matches('"'));
                let bound = match le {
                    Some("+Inf") => f64::INFINITY,
                    Some(b) => match b.parse() {
                        Ok(b) => b,
                        Err(_) => continue,
                    },
                    None => continue,
                };
                s.tick_buckets.push((bound, v));
            }
            "steerd_tick_duration_seconds_sum" => s.tick_sum = v,
            "steerd_tick_duration_seconds_count" => s.tick_count = v,
            "steerd_tick_overruns_total" | "steerd_tick_overruns" => s.overruns = v,
            "steerd_frames_dropped_total" | "steerd_frames_dropped" => s.frames_dropped = v,
            "steerd_bytes_sent_total" | "steerd_bytes_sent" => s.bytes_sent = v,
            "steerd_connections" => s.connections = v,
            "steerd_agents" => s.agents = v,
            "process_cpu_seconds_total" => s.process_cpu_s = Some(v),
            _ => {}
        }
    }
    s.tick_buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    s
}

impl Scrape {
    /// What happened between `earlier` and `self` (counters and buckets subtracted).
    pub fn since(&self, earlier: &Scrape) -> Scrape {
        let buckets = self
            .tick_buckets
            .iter()
            .map(|&(le, n)| {
                let before = earlier.tick_buckets.iter().find(|b| b.0 == le).map_or(0.0, |b| b.1);
                (le, (n - before).max(0.0))
            })
            .collect();
        Scrape {
            tick_buckets: buckets,
            tick_sum: self.tick_sum - earlier.tick_sum,
            tick_count: self.tick_count - earlier.tick_count,
            overruns: self.overruns - earlier.overruns,
            frames_dropped: self.frames_dropped - earlier.frames_dropped,
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            connections: self.connections,
            agents: self.agents,
            process_cpu_s: self.process_cpu_s.zip(earlier.process_cpu_s).map(|(a, b)| a - b),
        }
    }

    /// Quantile `q` of the tick duration, seconds, interpolated linearly inside its bucket
    /// (as Prometheus' `histogram_quantile`); the buckets are powers of two from 0.1 ms, so
    /// the value is within a factor of two. `None` without ticks.
    pub fn tick_quantile(&self, q: f64) -> Option<f64> {
        let total = self.tick_buckets.last().map(|b| b.1).filter(|&n| n > 0.0)?;
        let rank = q.clamp(0.0, 1.0) * total;
        let mut prev = (0.0, 0.0);
        for &(le, n) in &self.tick_buckets {
            if n >= rank {
                if le.is_infinite() {
                    return Some(prev.0);
                }
                let width = n - prev.1;
                let frac = if width > 0.0 { (rank - prev.1) / width } else { 1.0 };
                return Some(prev.0 + (le - prev.0) * frac);
            }
            prev = (le, n);
        }
        Some(prev.0)
    }

    /// Mean tick duration, seconds.
    pub fn tick_mean(&self) -> Option<f64> {
        (self.tick_count > 0.0).then(|| self.tick_sum / self.tick_count)
    }
}

/// GETs `url` (plain `http://` only) and returns the body, within `timeout`.
pub async fn get(url: &str, timeout: Duration) -> anyhow::Result<String> {
    tokio::time::timeout(timeout, get_inner(url)).await.context("timed out")?
}

async fn get_inner(url: &str) -> anyhow::Result<String> {
    let rest = url.strip_prefix("http://").context("only http:// metrics URLs are supported")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = tokio::net::TcpStream::connect(authority).await.with_context(|| format!("connecting to {authority}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAccept: text/plain\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    stream.take(16 << 20).read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").context("malformed HTTP response")?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("GET {url}: {status}");
    }
    if head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked")) {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Scrapes and parses `/metrics`.
pub async fn scrape(url: &str) -> anyhow::Result<Scrape> {
    Ok(parse(&get(url, Duration::from_secs(5)).await?))
}

/// CPU seconds (user + system) and RSS bytes of a process, from `/proc` (Linux).
pub fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the `(comm)`, which may contain spaces.
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    // USER_HZ is 100 on every Linux ABI in use.
    Some((ticks / 100.0, rss_kb * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# HELP steerd_tick_duration_seconds Duration of one world tick\n\
# TYPE steerd_tick_duration_seconds histogram\n\
steerd_tick_duration_seconds_sum 0.5\n\
steerd_tick_duration_seconds_count 100\n\
steerd_tick_duration_seconds_bucket{le=\"0.001\"} 10\n\
steerd_tick_duration_seconds_bucket{le=\"0.002\"} 90\n\
steerd_tick_duration_seconds_bucket{le=\"0.004\"} 99\n\
steerd_tick_duration_seconds_bucket{le=\"0.008\"} 100\n\
steerd_tick_duration_seconds_bucket{le=\"+Inf\"} 100\n\
# TYPE steerd_tick_overruns counter\n\
steerd_tick_overruns_total 2\n\
steerd_frames_dropped_total 7\n\
steerd_connections 50\n\
# TYPE process_cpu_seconds counter\n\
process_cpu_seconds_total 12.5\n\
steerd_commands_total{kind=\"move_to\",result=\"ok\"} 12\n";

    #[test]
    fn parses_and_interpolates() {
        let s = parse(SAMPLE);
        assert_eq!(s.tick_buckets.len(), 5);
        assert_eq!((s.tick_count, s.overruns, s.frames_dropped, s.connections), (100.0, 2.0, 7.0, 50.0));
        assert!((s.tick_mean().unwrap() - 0.005).abs() < 1e-12);
        // p50: rank 50 in (0.001, 0.002] holding 10..90 → 0.001 + 0.001·40/80.
        assert!((s.tick_quantile(0.5).unwrap() - 0.0015).abs() < 1e-9);
        assert!((s.tick_quantile(0.99).unwrap() - 0.004).abs() < 1e-9);
        assert!((s.tick_quantile(1.0).unwrap() - 0.008).abs() < 1e-9);
        let d = s.since(&parse("steerd_tick_duration_seconds_bucket{le=\"0.001\"} 10\nsteerd_tick_overruns_total 1\n"));
        assert_eq!(d.tick_buckets[0], (0.001, 0.0));
        assert_eq!(d.overruns, 1.0);
        assert_eq!(s.process_cpu_s, Some(12.5));
        // CPU seconds between two scrapes; unknown when either lacks them.
        assert_eq!(s.since(&parse("process_cpu_seconds_total 10\n")).process_cpu_s, Some(2.5));
        assert_eq!(d.process_cpu_s, None);
        assert!(Scrape::default().tick_quantile(0.5).is_none());
    }

    #[test]
    fn derives_the_metrics_url() {
        assert_eq!(metrics_url("ws://127.0.0.1:8080/ws").unwrap(), "http://127.0.0.1:8080/metrics");
        assert_eq!(metrics_url("wss://h.example/ws?format=json").unwrap(), "https://h.example/metrics");
        assert_eq!(metrics_url("ws://h:1").unwrap(), "http://h:1/metrics");
        assert!(metrics_url("ftp://h/x").is_err());
        assert!(metrics_url("nonsense").is_err());
    }

    #[test]
    fn dechunks() {
        assert_eq!(dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "hello world");
    }

    #[test]
    fn reads_own_process_usage() {
        let (cpu, rss) = proc_usage(std::process::id()).unwrap();
        assert!(cpu >= 0.0 && rss > 0);
    }
}
