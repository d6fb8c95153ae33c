//! Prometheus metrics (`GET /metrics`), with prometheus-client.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of the command counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    /// Command kind.
    pub kind: String,
    /// `ok` or `error`.
    pub result: String,
}

/// Labels of the per-world gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorldLabels {
    /// World name.
    pub world: String,
}

/// Every metric of the server.
pub struct Metrics {
    registry: Registry,
    /// Unprefixed process metrics (`process_cpu_seconds_total`), read at each scrape.
    process: Registry,
    /// Tick durations, seconds.
    pub tick_seconds: Histogram,
    /// Ticks dropped by worlds that fell behind.
    pub overruns: Counter,
    /// Agents in all worlds.
    pub agents: Gauge,
    /// Durable worlds that are not durable now (a failed write, a full queue).
    pub worlds_not_durable: Gauge,
    /// Stored worlds that failed to recover at start.
    pub worlds_failed_recovery: Gauge,
    /// Bytes of durable worlds' logs waiting for a failed write to succeed.
    pub persist_backlog_bytes: Gauge,
    /// Open WebSocket subscriptions.
    pub subscribers: Gauge,
    /// Open WebSocket connections.
    pub connections: Gauge,
    /// Frames sent to clients.
    pub frames_sent: Counter,
    /// Bytes sent to clients.
    pub bytes_sent: Counter,
    /// Tick frames a slow client skipped (resynced by keyframes).
    pub frames_dropped: Counter,
    /// Keyframes sent.
    pub keyframes_sent: Counter,
    /// `cells` messages built (shared ones once, private ones per connection).
    pub cells_built: Counter,
    /// `cells` messages sent as a shared message another connection built.
    pub cells_shared_hits: Counter,
    /// Microseconds connections spent writing their messages to the socket.
    pub send_micros: Counter,
    /// WebSocket messages written to sockets (one per write of a batch).
    pub ws_messages: Counter,
    /// Subscriptions whose frames the worlds' fan-out writers send (steady ones).
    pub fanout_members: Gauge,
    /// Socket writes made by the fan-out writers.
    pub fanout_writes: Counter,
    /// Fan-out members given back to their connection's own send task (a frame not steady for
    /// them, a write the socket did not take at once, a writer that lagged or stopped).
    pub fanout_handbacks: Counter,
    /// Connections refused (limits) or closed for abuse.
    pub connections_refused: Counter,
    /// WebSocket clients closed as slow consumers (4008: a write blocked past the timeout).
    pub slow_closes: Counter,
    /// Commands by kind and result.
    pub commands: Family<CommandLabels, Counter>,
    /// MoveTo flow fields requested by the worlds.
    pub fields_requested: Counter,
    /// Requested flow fields built by the builder threads before they were due.
    pub fields_delivered: Counter,
    /// Requested flow fields a world built on the tick they were due (the builder was late).
    pub fields_built_on_tick: Counter,
    /// Flow-field jobs refused because the builder queue was full.
    pub field_builds_refused: Counter,
    /// Ticks per second each world actually ran over the last second.
    pub world_effective_tick_rate: Family<WorldLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// 1 when a world cannot keep its tick rate (it dropped ticks in the last second).
    pub world_overloaded: Family<WorldLabels, Gauge>,
    /// Seeks served by replay worlds.
    pub replay_seeks: Counter,
    /// Ticks simulated by replay-world seeks.
    pub replay_seek_ticks: Counter,
    /// Recorded checkpoints a replay world did not reproduce.
    pub replay_divergences: Counter,
    /// Worlds handed off to another server.
    pub handoffs: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers everything.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("steerd");
        let tick_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        let m = Metrics {
            tick_seconds: tick_seconds.clone(),
            overruns: Counter::default(),
            agents: Gauge::default(),
            worlds_not_durable: Gauge::default(),
            worlds_failed_recovery: Gauge::default(),
            persist_backlog_bytes: Gauge::default(),
            subscribers: Gauge::default(),
            connections: Gauge::default(),
            frames_sent: Counter::default(),
            bytes_sent: Counter::default(),
            frames_dropped: Counter::default(),
            keyframes_sent: Counter::default(),
            cells_built: Counter::default(),
            cells_shared_hits: Counter::default(),
            send_micros: Counter::default(),
            ws_messages: Counter::default(),
            fanout_members: Gauge::default(),
            fanout_writes: Counter::default(),
            fanout_handbacks: Counter::default(),
            connections_refused: Counter::default(),
            slow_closes: Counter::default(),
            commands: Family::default(),
            fields_requested: Counter::default(),
            fields_delivered: Counter::default(),
            fields_built_on_tick: Counter::default(),
            field_builds_refused: Counter::default(),
            world_effective_tick_rate: Family::default(),
            world_overloaded: Family::default(),
            replay_seeks: Counter::default(),
            replay_seek_ticks: Counter::default(),
            replay_divergences: Counter::default(),
            handoffs: Counter::default(),
            registry: Registry::default(),
            process: Registry::default(),
        };
        registry.register("tick_duration_seconds", "Duration of one world tick", m.tick_seconds.clone());
        registry.register("tick_overruns", "Ticks dropped because a world fell behind", m.overruns.clone());
        registry.register("agents", "Agents in all worlds", m.agents.clone());
        registry.register("worlds_not_durable", "Durable worlds whose log is not on disk now (write errors, full writer queue)", m.worlds_not_durable.clone());
        registry.register("worlds_failed_recovery", "Stored worlds that failed to recover at start", m.worlds_failed_recovery.clone());
        registry.register("persist_backlog_bytes", "Bytes of durable worlds' logs waiting for a failed write to succeed", m.persist_backlog_bytes.clone());
        registry.register("subscribers", "World subscriptions of connected clients", m.subscribers.clone());
        registry.register("connections", "Open WebSocket connections", m.connections.clone());
        registry.register("frames_sent", "Frames sent to clients", m.frames_sent.clone());
        registry.register("bytes_sent", "Bytes of frames sent to clients", m.bytes_sent.clone());
        registry.register("frames_dropped", "Tick frames skipped by slow clients (resynced by keyframes)", m.frames_dropped.clone());
        registry.register("keyframes_sent", "Keyframes sent", m.keyframes_sent.clone());
        registry.register("cells_messages_built", "Cells messages built (shared ones once, private ones per connection)", m.cells_built.clone());
        registry.register("cells_shared_hits", "Cells messages sent as built by another connection (shared)", m.cells_shared_hits.clone());
        registry.register("send_microseconds", "Microseconds spent writing messages to client sockets", m.send_micros.clone());
        registry.register("ws_messages_sent", "WebSocket messages written to client sockets", m.ws_messages.clone());
        registry.register("fanout_members", "Subscriptions sent by the worlds' fan-out writers", m.fanout_members.clone());
        registry.register("fanout_writes", "Socket writes made by the fan-out writers", m.fanout_writes.clone());
        registry.register("fanout_handbacks", "Fan-out members given back to their connection's send task", m.fanout_handbacks.clone());
        registry.register("connections_refused", "Connections refused or closed by limits", m.connections_refused.clone());
        registry.register("slow_consumers_closed", "WebSocket clients closed as slow consumers (4008)", m.slow_closes.clone());
        registry.register("commands", "Commands by kind and result", m.commands.clone());
        registry.register("flow_fields_requested", "MoveTo flow fields requested by the worlds", m.fields_requested.clone());
        registry.register("flow_fields_delivered", "Flow fields built by the builder threads in time", m.fields_delivered.clone());
        registry.register("flow_fields_built_on_tick", "Flow fields a world built itself on their due tick", m.fields_built_on_tick.clone());
        registry.register("flow_field_builds_refused", "Flow-field jobs refused by a full builder queue", m.field_builds_refused.clone());
        registry.register("world_effective_tick_rate", "Ticks per second a world actually ran over the last second", m.world_effective_tick_rate.clone());
        registry.register("world_overloaded", "1 when a world cannot keep its tick rate (it dropped ticks in the last second)", m.world_overloaded.clone());
        registry.register("replay_seeks", "Seeks served by replay worlds", m.replay_seeks.clone());
        registry.register("replay_seek_ticks", "Ticks simulated by replay-world seeks", m.replay_seek_ticks.clone());
        registry.register("replay_divergences", "Recorded checkpoints a replay world did not reproduce", m.replay_divergences.clone());
        registry.register("handoffs", "Worlds handed off to another server (they run there now)", m.handoffs.clone());
        registry.register_collector(Box::new(HeapCollector));
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessCollector));
        Metrics { registry, process, ..m }
    }

    /// Sets the per-world gauges to `(name, effective tick rate, overloaded)` of the worlds
    /// that exist now (deleted worlds disappear).
    pub fn set_worlds<'a>(&self, worlds: impl Iterator<Item = (&'a str, f64, bool)>) {
        self.world_effective_tick_rate.clear();
        self.world_overloaded.clear();
        for (name, rate, overloaded) in worlds {
            let l = WorldLabels { world: name.to_string() };
            self.world_effective_tick_rate.get_or_create(&l).set(rate);
            self.world_overloaded.get_or_create(&l).set(i64::from(overloaded));
        }
    }

    /// Counts a command.
    pub fn command(&self, kind: &str, ok: bool) {
        self.commands.get_or_create(&CommandLabels { kind: kind.to_string(), result: if ok { "ok" } else { "error" }.into() }).inc();
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use prometheus_client::encoding::text;
        let mut out = String::new();
        let ok = text::encode_registry(&mut out, &self.registry)
            .and_then(|()| text::encode_registry(&mut out, &self.process))
            .and_then(|()| text::encode_eof(&mut out));
        if ok.is_err() {
            out.clear();
        }
        out
    }
}

/// Bytes of the process heap, as the global allocator counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in live allocations: grows only while the program holds more (a leak does).
    pub allocated: u64,
    /// Bytes of physically resident pages the allocator holds (free ones too).
    pub resident: u64,
}

/// Where [`HeapCollector`] reads the heap: set once by the binary whose global allocator can
/// tell (jemalloc, see `main.rs`); unset, the two metrics are left out.
static HEAP_PROBE: std::sync::OnceLock<fn() -> Option<HeapStats>> = std::sync::OnceLock::new();

/// Installs the heap probe (first call wins).
pub fn set_heap_probe(probe: fn() -> Option<HeapStats>) {
    let _ = HEAP_PROBE.set(probe);
}

/// `steerd_heap_allocated_bytes` and `steerd_heap_resident_bytes`, read at each scrape from
/// the probe the binary installed (left out without one, or when it fails). The reliability
/// suite's leak gate (test 10) reads the allocated bytes: RSS also moves with what the
/// allocator keeps, a busy host's timing included.
#[derive(Debug)]
struct HeapCollector;

impl Collector for HeapCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(h) = HEAP_PROBE.get().and_then(|probe| probe()) else {
            return Ok(());
        };
        for (name, help, v) in [
            ("heap_allocated_bytes", "Bytes in live heap allocations (the global allocator's count)", h.allocated),
            ("heap_resident_bytes", "Bytes of resident pages the heap allocator holds", h.resident),
        ] {
            let gauge = prometheus_client::metrics::gauge::ConstGauge::new(v as i64);
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// `process_cpu_seconds_total` (the Prometheus convention's name, without the `steerd_`
/// prefix): user + system CPU time of this process, read from `/proc/self/stat` at each
/// scrape. Left out where that file does not exist (not Linux) or cannot be parsed.
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(secs) = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| cpu_seconds_from_stat(&s)) else {
            return Ok(());
        };
        let counter = prometheus_client::metrics::counter::ConstCounter::new(secs);
        let metric = encoder.encode_descriptor("process_cpu_seconds", "Total user and system CPU time spent in seconds", None, MetricType::Counter)?;
        counter.encode(metric)
    }
}

/// User + system CPU seconds from the text of `/proc/<pid>/stat` (fields 14 and 15, in clock
/// ticks of USER_HZ, which is 100 on every Linux ABI in use). The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
fn cpu_seconds_from_stat(stat: &str) -> Option<f64> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let mut f = after.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_seconds_from_stat() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
        let stat = "4242 (steer d) (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 566 0 0 20 0 9 0 100 1000 50";
        assert_eq!(cpu_seconds_from_stat(stat), Some(18.0));
        assert_eq!(cpu_seconds_from_stat("4242 (steerd) S 1"), None);
        assert_eq!(cpu_seconds_from_stat("garbage"), None);
    }

    #[test]
    fn renders_process_cpu_once_with_one_eof() {
        let text = Metrics::new().render();
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
        assert!(text.contains("steerd_tick_duration_seconds"), "{text}");
        if std::path::Path::new("/proc/self/stat").exists() {
            let line = text.lines().find(|l| l.starts_with("process_cpu_seconds_total ")).expect("process_cpu_seconds_total");
            let v: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a number");
            assert!(v.is_finite() && v >= 0.0, "{line}");
        }
    }
}
