//! Builds requested flow fields off the world threads.
//!
//! A world's tick requests the flow fields its MoveTo orders need and uses each a fixed number
//! of ticks later (see `sim::nav`). The world thread hands the requests ([`FieldJob`]s) to this
//! pool and takes the built fields back before each tick; whatever has not arrived when due the
//! tick builds itself, so the states never depend on the pool's timing. One pool serves every
//! world of the process; its queue is bounded (`limits.max_queued_field_builds`), and a job the
//! world stopped waiting for is skipped unbuilt: each submitted job has a [`BuildTicket`], the
//! handshake between the world thread and the builder (the sim core knows requests only by id).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use crate::sim::nav::FieldJob;
use crate::sim::nav::flowfield::FlowField;

const QUEUED: u8 = 0;
const BUILDING: u8 = 1;
const CANCELLED: u8 = 2;

/// Where a submitted job is, shared by the world thread and the builder holding the job.
#[derive(Debug, Clone)]
pub struct BuildTicket(Arc<AtomicU8>);

impl BuildTicket {
    fn new() -> Self {
        BuildTicket(Arc::new(AtomicU8::new(QUEUED)))
    }

    /// Claims the job for building: false once the world took it back or cancelled it.
    fn start(&self) -> bool {
        self.0.compare_exchange(QUEUED, BUILDING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the job off the builder if nobody has started it (so the tick builds the field
    /// itself). False when a builder is building it or has built it: it is worth waiting for.
    pub fn cancel_unstarted(&self) -> bool {
        match self.0.compare_exchange(QUEUED, CANCELLED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == CANCELLED,
        }
    }

    /// The world no longer waits for the field: a builder that has not started skips it.
    pub fn cancel(&self) {
        let _ = self.0.compare_exchange(QUEUED, CANCELLED, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The pool.
pub struct FieldBuilder {
    pool: rayon::ThreadPool,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
}

/// Why a pool could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the flow-field builder threads: {0}")]
pub struct FieldBuilderError(#[from] rayon::ThreadPoolBuildError);

impl FieldBuilder {
    /// `threads` builder threads (at least 1) at nice value `nice` (see [`lower_priority`]),
    /// and at most `max_queued` jobs waiting or running.
    pub fn new(threads: usize, max_queued: usize, nice: i32) -> Result<Self, FieldBuilderError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("flowfield-{i}"))
            .start_handler(move |_| lower_priority(nice))
            .build()?;
        Ok(FieldBuilder { pool, queued: Arc::new(AtomicUsize::new(0)), max_queued: max_queued.max(1) })
    }

    /// Queues `job`; the field goes to `done`. Returns the job's ticket, or `None` (the job is
    /// dropped, and the world builds the field on its due tick) when the queue is full.
    pub fn submit(&self, job: FieldJob, done: Sender<FlowField>) -> Option<BuildTicket> {
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.max_queued {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let queued = self.queued.clone();
        let ticket = BuildTicket::new();
        let mine = ticket.clone();
        self.pool.spawn(move || {
            if mine.start() {
                // The world may have gone; then nobody needs the field.
                let _ = done.send(job.build());
            }
            queued.fetch_sub(1, Ordering::AcqRel);
        });
        Some(ticket)
    }

    /// Jobs waiting or running.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

/// Sets the calling thread's nice value to `nice` when that is above 0 (a lower priority than
/// the world threads and the connection tasks): a field is used a fixed number of ticks after
/// it is requested, and one the builder has not started when due the tick builds itself, so a
/// builder that yields the CPU slows nothing down but itself. Lowering one's own priority
/// needs no privilege; a failure is logged and the thread runs on at the process's priority.
fn lower_priority(nice: i32) {
    if nice <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // On Linux PRIO_PROCESS with a thread id sets that one thread's nice value.
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
            tracing::warn!("flow-field builder: cannot set nice {nice}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::sim::world::World;

    /// A world whose MoveTo needs a field, stepped `ticks` times; with `builder`, the jobs go to
    /// the pool and the fields come back as the server's world thread does it.
    fn run(builder: Option<&FieldBuilder>, ticks: u64) -> (u64, crate::sim::nav::PipelineStats) {
        let (scenario, mut world) = maze();
        let (tx, rx) = std::sync::mpsc::channel();
        for t in 0..ticks {
            while let Ok(f) = rx.try_recv() {
                world.deliver_field(f);
            }
            if let Err(e) = scenario.apply_orders(&mut world, t) {
                panic!("orders: {e}");
            }
            world.step();
            for job in world.take_field_jobs() {
                if let Some(b) = builder {
                    assert!(b.submit(job, tx.clone()).is_some());
                }
            }
            // Give the pool time to finish, as a real tick period would.
            if builder.is_some() {
                std::thread::sleep(std::time::Duration::from_millis(2));
                while builder.is_some_and(|b| b.queued() > 0) {
                    std::thread::yield_now();
                }
            }
        }
        let stats = world.nav().map(|n| n.pipeline_stats()).unwrap_or_default();
        (crate::sim::hash::state_hash(&world), stats)
    }

    /// The field jobs maze-moveto's first `ticks` steps request.
    fn maze_jobs(ticks: u64) -> Vec<FieldJob> {
        let (scenario, mut world) = maze();
        let mut jobs = Vec::new();
        for t in 0..ticks {
            if let Err(e) = scenario.apply_orders(&mut world, t) {
                panic!("orders: {e}");
            }
            world.step();
            jobs.extend(world.take_field_jobs());
        }
        jobs
    }

    fn builder(threads: usize, max_queued: usize) -> FieldBuilder {
        match FieldBuilder::new(threads, max_queued, 0) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    fn maze() -> (Scenario, World) {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/maze-moveto.json"))
            .unwrap_or_default();
        let scenario: Scenario = match serde_json::from_str(&text) {
            Ok(s) => s,
            Err(e) => panic!("maze-moveto.json: {e}"),
        };
        match scenario.build() {
            Ok(w) => (scenario, w),
            Err(e) => panic!("build: {e}"),
        }
    }

    #[test]
    fn background_builds_give_the_same_states_as_builds_on_the_tick() {
        let pool = builder(1, 8);
        let (inline_hash, inline) = run(None, 120);
        let (pool_hash, pooled) = run(Some(&pool), 120);
        assert_eq!(inline_hash, pool_hash);
        // Without a builder every requested field is built on its due tick; with one, every
        // field arrived before it was due.
        assert!(inline.requested > 0);
        assert_eq!(inline.built_on_tick, inline.requested);
        assert_eq!(pooled.requested, inline.requested);
        assert_eq!(pooled.delivered, pooled.requested);
        assert_eq!(pooled.built_on_tick, 0);
    }

    #[test]
    fn a_full_queue_refuses_jobs() {
        let pool = builder(1, 1);
        // Hold the only slot with a job that blocks until released.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        pool.queued.fetch_add(1, Ordering::AcqRel);
        let q = pool.queued.clone();
        pool.pool.spawn(move || {
            let _ = release_rx.recv();
            q.fetch_sub(1, Ordering::AcqRel);
        });
        let jobs = maze_jobs(5);
        assert!(!jobs.is_empty());
        let (tx, _rx) = std::sync::mpsc::channel();
        for job in jobs {
            assert!(pool.submit(job, tx.clone()).is_none(), "the queue holds one job and it is taken");
        }
        let _ = release_tx.send(());
    }

    #[test]
    fn a_job_taken_back_before_it_starts_is_skipped_and_a_kept_one_is_built() {
        let pool = builder(1, 8);
        // Hold the only builder thread until both jobs are queued behind it.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        pool.pool.spawn(move || {
            let _ = release_rx.recv();
        });
        let jobs = maze_jobs(5);
        // The same request submitted twice: two jobs, two tickets.
        let Some(job) = jobs.first() else { panic!("no field requested") };
        let (tx, rx) = std::sync::mpsc::channel();
        let (skipped, kept) = (job.clone(), job.clone());
        let Some(t_skip) = pool.submit(skipped, tx.clone()) else { panic!("queue full") };
        let Some(t_keep) = pool.submit(kept.clone(), tx) else { panic!("queue full") };
        assert!(t_skip.cancel_unstarted(), "not started: taken back");
        assert!(t_skip.cancel_unstarted(), "taken back stays taken back");
        let _ = release_tx.send(());
        let built = match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(f) => f,
            Err(e) => panic!("the kept job was not built: {e}"),
        };
        assert_eq!(built.goal_cell(), kept.build().goal_cell());
        while pool.queued() > 0 {
            std::thread::yield_now();
        }
        assert!(rx.try_recv().is_err(), "the job taken back was not built");
        // Built: too late to take back (the world waits for it instead).
        assert!(!t_keep.cancel_unstarted());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn builder_threads_run_at_the_nice_value_set() {
        let read_nice = || rustix::process::getpriority_process(Some(rustix::thread::gettid()));
        let own = read_nice().unwrap_or(-100);
        for (nice, want) in [(12, 12), (0, own)] {
            let pool = match FieldBuilder::new(1, 1, nice) {
                Ok(p) => p,
                Err(e) => panic!("{e}"),
            };
            let seen = pool.pool.install(read_nice);
            assert_eq!(seen.ok(), Some(want), "nice {nice}");
        }
    }
}