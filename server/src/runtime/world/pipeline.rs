//! A world's side of the flow-field pipeline: the jobs it submitted to the shared builder
//! threads ([`FieldBuilder`]), the channel their fields come back on, and the pipeline's
//! counters as last reported to the metrics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use super::super::fields::{BuildTicket, FieldBuilder};
use crate::metrics::Metrics;
use crate::sim::World;
use crate::sim::nav::PipelineStats;
use crate::sim::nav::flowfield::FlowField;

/// Longest a tick waits for a builder finishing a field it needs (then it builds the field).
const FIELD_WAIT: Duration = Duration::from_secs(2);

pub(super) struct FieldPipeline {
    builder: Arc<FieldBuilder>,
    tx: Sender<FlowField>,
    rx: Receiver<FlowField>,
    /// Tickets of the jobs submitted whose fields the world still wants, by request id (at most
    /// the builder's bounded queue: a refused job gets none).
    tickets: BTreeMap<u64, BuildTicket>,
    /// Pipeline counters at the last tick (the metrics count the differences).
    stats: PipelineStats,
}

impl FieldPipeline {
    /// Unbounded channel, but it holds at most the jobs in the builder's bounded queue.
    pub(super) fn new(builder: Arc<FieldBuilder>) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        FieldPipeline { builder, tx, rx, tickets: BTreeMap::new(), stats: PipelineStats::default() }
    }

    /// For a new world: fields still being built were for the old one. A new channel leaves them
    /// unheard, and the jobs not started yet are skipped.
    pub(super) fn restart(&mut self) {
        (self.tx, self.rx) = std::sync::mpsc::channel();
        for t in std::mem::take(&mut self.tickets).into_values() {
            t.cancel();
        }
        self.stats = PipelineStats::default();
    }

    /// Hands the world the flow fields built since the last tick. For a field due now that a
    /// builder is still building, waits for it (at most [`FIELD_WAIT`]) rather than build it a
    /// second time; one not started yet is taken back, and the tick builds it.
    pub(super) fn collect(&mut self, world: &mut World) {
        let deadline = Instant::now() + FIELD_WAIT;
        loop {
            while let Ok(f) = self.rx.try_recv() {
                world.deliver_field(f);
            }
            // A due field with no job at a builder (refused), or whose job was not started, is
            // built by the tick; one being built is waited for.
            let mut awaited = world.awaited_fields();
            awaited.retain(|id| self.tickets.get(id).is_some_and(|t| !t.cancel_unstarted()));
            let now = Instant::now();
            if awaited.is_empty() || now >= deadline {
                return;
            }
            match self.rx.recv_timeout(deadline - now) {
                Ok(f) => world.deliver_field(f),
                Err(_) => return,
            }
        }
    }

    /// After a step: jobs the world no longer waits for (built on the tick, handed back, or
    /// dropped) are skipped by the builder if not started; the new ones are submitted.
    pub(super) fn submit(&mut self, world: &mut World, metrics: &Metrics) {
        self.tickets.retain(|&id, t| {
            let wanted = world.field_requested(id);
            if !wanted {
                t.cancel();
            }
            wanted
        });
        for job in world.take_field_jobs() {
            let id = job.id();
            match self.builder.submit(job, self.tx.clone()) {
                Some(t) => {
                    self.tickets.insert(id, t);
                }
                None => {
                    metrics.field_builds_refused.inc();
                }
            }
        }
    }

    /// Adds the world's pipeline counters since the last call to the metrics.
    pub(super) fn count(&mut self, world: &World, metrics: &Metrics) {
        if let Some(p) = world.nav().map(|n| n.pipeline_stats()) {
            let last = std::mem::replace(&mut self.stats, p);
            metrics.fields_requested.inc_by(p.requested.saturating_sub(last.requested));
            metrics.fields_delivered.inc_by(p.delivered.saturating_sub(last.delivered));
            metrics.fields_built_on_tick.inc_by(p.built_on_tick.saturating_sub(last.built_on_tick));
        }
    }
}
