//! Prometheus metrics (`GET /metrics`), with prometheus-client.

use prometheus_client::encoding::EncodeLabelSet;
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
    /// Tick durations, seconds.
    pub tick_seconds: Histogram,
    /// Ticks dropped by worlds that fell behind.
    pub overruns: Counter,
    /// Agents in all worlds.
    pub agents: Gauge,
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
            connections_refused: Counter::default(),
            slow_closes: Counter::default(),
            commands: Family::default(),
            fields_requested: Counter::default(),
            fields_delivered: Counter::default(),
            fields_built_on_tick: Counter::default(),
            field_builds_refused: Counter::default(),
            world_effective_tick_rate: Family::default(),
            world_overloaded: Family::default(),
            registry: Registry::default(),
        };
        registry.register("tick_duration_seconds", "Duration of one world tick", m.tick_seconds.clone());
        registry.register("tick_overruns", "Ticks dropped because a world fell behind", m.overruns.clone());
        registry.register("agents", "Agents in all worlds", m.agents.clone());
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
        registry.register("connections_refused", "Connections refused or closed by limits", m.connections_refused.clone());
        registry.register("slow_consumers_closed", "WebSocket clients closed as slow consumers (4008)", m.slow_closes.clone());
        registry.register("commands", "Commands by kind and result", m.commands.clone());
        registry.register("flow_fields_requested", "MoveTo flow fields requested by the worlds", m.fields_requested.clone());
        registry.register("flow_fields_delivered", "Flow fields built by the builder threads in time", m.fields_delivered.clone());
        registry.register("flow_fields_built_on_tick", "Flow fields a world built itself on their due tick", m.fields_built_on_tick.clone());
        registry.register("flow_field_builds_refused", "Flow-field jobs refused by a full builder queue", m.field_builds_refused.clone());
        registry.register("world_effective_tick_rate", "Ticks per second a world actually ran over the last second", m.world_effective_tick_rate.clone());
        registry.register("world_overloaded", "1 when a world cannot keep its tick rate (it dropped ticks in the last second)", m.world_overloaded.clone());
        Metrics { registry, ..m }
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
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
