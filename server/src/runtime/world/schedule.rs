//! When a world's loop ticks: paused, frozen for a handoff, held after one until its sessions
//! resume, or running a `Step`; the catch-up rule that keeps a late world from bursting; how
//! many requests a turn serves; and the window over which the effective tick rate and
//! `overloaded` are measured. The runner reads and sets these; it keeps no schedule of its own.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::types::Reply;
use super::types::{Arrival, WorldStats};

/// The schedule state of one world's loop.
pub(super) struct Schedule {
    /// Paused: requests are served, no tick runs.
    pub(super) paused: bool,
    /// Frozen for a handoff: no tick, no change (see [`super::Request::Freeze`]).
    pub(super) frozen: bool,
    /// Arrived by a handoff and not ticking yet (see [`Arrival`]).
    pub(super) hold: Option<Arrival>,
    /// A `Step` in progress: ticks left and whom to answer when they are done.
    pub(super) stepping: Option<(u32, Reply<u64>)>,
    /// Late ticks run back to back at most (≥ 1); the rest are dropped (see [`catch_up`]).
    pub(super) max_catchup: u32,
    /// Requests served per turn of the loop (≥ 1).
    pub(super) max_requests_per_turn: usize,
    /// Effective tick rate and overload measurement.
    window: RateWindow,
}

impl Schedule {
    /// A loop's schedule at its start.
    pub(super) fn new(paused: bool, max_catchup: u32, max_requests_per_turn: usize, hold: Option<Arrival>) -> Self {
        Schedule {
            paused,
            frozen: false,
            hold,
            stepping: None,
            max_catchup: max_catchup.max(1),
            max_requests_per_turn: max_requests_per_turn.max(1),
            window: RateWindow::new(Instant::now()),
        }
    }

    /// Counts ticks run and dropped; at the end of each window publishes the effective tick
    /// rate and whether the world is overloaded (it dropped ticks during the window) to `stats`.
    pub(super) fn measure(&mut self, stats: &WorldStats, now: Instant, ticks: u64, dropped: u64) {
        self.window.ticks += ticks;
        self.window.dropped += dropped;
        let elapsed = now.saturating_duration_since(self.window.start);
        if elapsed < RATE_WINDOW {
            return;
        }
        let rate = self.window.ticks as f64 / elapsed.as_secs_f64();
        stats.effective_tick_rate_milli.store((rate * 1000.0).min(f64::from(u32::MAX)) as u32, Ordering::Relaxed);
        stats.overloaded.store(self.window.dropped > 0, Ordering::Relaxed);
        self.window = RateWindow::new(now);
    }
}

/// The tick schedule's catch-up rule. A tick was due at `next`; it is now `now`. If the world
/// is more than `max_catchup` whole periods late, the excess is dropped (counted, not run):
/// returns the deadline to treat as this tick's (moved forward by the dropped periods) and how
/// many ticks were dropped. At most `max_catchup` late ticks then run back to back, so there is
/// never a burst (tokio's `interval` would burst by default).
pub fn catch_up(next: Instant, now: Instant, period: Duration, max_catchup: u32) -> (Instant, u64) {
    let late = now.saturating_duration_since(next);
    let behind = (late.as_secs_f64() / period.as_secs_f64()) as u64;
    if behind > u64::from(max_catchup) {
        let dropped = behind - u64::from(max_catchup);
        (next + period.mul_f64(dropped as f64), dropped)
    } else {
        (next, 0)
    }
}

/// Length of the window over which the effective tick rate and `overloaded` are measured.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Ticks run and ticks dropped since `start` (the effective tick rate and overload window).
struct RateWindow {
    start: Instant,
    ticks: u64,
    dropped: u64,
}

impl RateWindow {
    fn new(start: Instant) -> Self {
        RateWindow { start, ticks: 0, dropped: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_up_runs_at_most_the_bound_and_drops_the_rest() {
        let p = Duration::from_millis(50);
        let t0 = Instant::now();
        // On time, or less than a period late: nothing dropped.
        assert_eq!(catch_up(t0, t0, p, 3), (t0, 0));
        assert_eq!(catch_up(t0, t0 + Duration::from_millis(49), p, 3), (t0, 0));
        // 3 periods late with bound 3: run them all (no drop).
        assert_eq!(catch_up(t0, t0 + Duration::from_millis(150), p, 3), (t0, 0));
        // A 2 s stall at 20 Hz = 40 periods late: keep 3, drop 37.
        let (due, dropped) = catch_up(t0, t0 + Duration::from_secs(2), p, 3);
        assert_eq!(dropped, 37);
        assert_eq!(due, t0 + p * 37);
        // After the dropped time, the remaining lateness is within the bound: at most 3 more
        // ticks run back to back before the schedule is on time again.
        let late_after = (t0 + Duration::from_secs(2)).duration_since(due);
        assert!(late_after < p * 4, "{late_after:?}");
    }
}
