//! Maps server ticks to local time, from Ping/Pong samples.
//!
//! # The estimator
//!
//! The server steps world ticks on a fixed schedule, `due(T) = O + T·P` (`P` = 1 / tick rate,
//! `O` unknown, on the server's clock). Tick `T`'s frames are broadcast and the tick counter
//! that `Pong.server_tick` reports is stored at `pub(T) = due(T) + d_T`, where `d_T` is the
//! step + publish time. A Pong sent at server time `s` with `server_tick = T` therefore
//! satisfies `pub(T) <= s < pub(T+1)`. The Ping left at local time `send` and the Pong arrived
//! at `recv`, so `send <= s <= recv` (one machine, one monotonic clock; across machines add
//! the clock-rate drift, negligible over a minute). With `R = O + d` (the publish reference),
//! each sample bounds it:
//!
//! ```text
//!     send − (T+1)·P  <  R  <=  recv − T·P
//! ```
//!
//! All bots share one estimator ([`SharedClock`]): they watch the same world through one
//! local clock, so every bot's samples bound the same `R`, and many bots pinging at random
//! phases narrow it far faster than one bot could.
//!
//! A late tick (the world thread busy, e.g. computing a MoveTo flow field) publishes after
//! `R + T·P`, which breaks the lower bound (the Pong can arrive before tick `T+1` is
//! published although its due time has passed) but never the upper one. The estimate is
//! therefore the **smallest upper bound** of the recent samples (those of the last
//! [`WINDOW_NS`], and at least the newest [`MIN_SAMPLES`]):
//! `R̂ = min(recv − T·P) >= R`. Lateness measured against it is never overstated, and
//! understated by at most `R̂ − R`. The report's *error bound* is `R̂ − max(send − (T+1)·P)`
//! over the same window (the interval the samples leave for `R`), which is a true bound while
//! the server ticks on time; with pings at random phases of the tick it shrinks towards the
//! ping round trip. If the server drops ticks after an overrun its schedule moves later and
//! the old minimum overstates lateness by the dropped time until it leaves the window; the
//! window is therefore short (1 s: a swarm of 50 bots pinging twice a second gives 100
//! samples in it), widened only when too few samples fall in it.
//!
//! `lateness(T) = arrival − (R̂ + T·P)` is the time from the server publishing tick `T` to the
//! bot holding the frame. Lateness against the *due* time adds the step time `d` (the report
//! adds the server's mean tick duration scraped from `/metrics`). A `Pong` carrying a server
//! timestamp of the tick (e.g. `due(T)` in server-monotonic nanoseconds) would make this exact
//! up to `rtt/2` and remove the dependence on `d`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Samples older than this (ns, by arrival) leave the estimate, unless they are among the
/// newest [`MIN_SAMPLES`].
pub const WINDOW_NS: u64 = 1_000_000_000;

/// The estimate always spans at least this many of the newest samples.
pub const MIN_SAMPLES: usize = 32;

/// The estimator (times are nanoseconds on the swarm's clock): sliding minimum of the upper
/// bounds and maximum of the lower bounds, each a monotonic deque (amortised O(1)).
#[derive(Debug, Clone)]
pub struct TickClock {
    period_ns: f64,
    /// (arrival, upper bound), upper bounds strictly increasing front to back.
    upper: VecDeque<(u64, f64)>,
    /// (arrival, lower bound), lower bounds strictly decreasing front to back.
    lower: VecDeque<(u64, f64)>,
    /// Arrival times of the newest [`MIN_SAMPLES`] samples.
    recent: VecDeque<u64>,
}

impl TickClock {
    /// For a world ticking at `tick_rate_hz`.
    pub fn new(tick_rate_hz: f32) -> Self {
        let hz = if tick_rate_hz.is_finite() && tick_rate_hz > 0.0 { f64::from(tick_rate_hz) } else { 20.0 };
        TickClock { period_ns: 1e9 / hz, upper: VecDeque::new(), lower: VecDeque::new(), recent: VecDeque::with_capacity(MIN_SAMPLES + 1) }
    }

    /// Adds a Ping (sent at `send_ns`) / Pong (received at `recv_ns`, `server_tick`) sample.
    /// Tick 0 (not subscribed yet) and reversed times are ignored.
    pub fn observe(&mut self, send_ns: u64, recv_ns: u64, server_tick: u64) {
        if server_tick == 0 || recv_ns < send_ns {
            return;
        }
        let t = server_tick as f64;
        let lo = send_ns as f64 - (t + 1.0) * self.period_ns;
        let hi = recv_ns as f64 - t * self.period_ns;
        while self.upper.back().is_some_and(|&(_, u)| u >= hi) {
            self.upper.pop_back();
        }
        self.upper.push_back((recv_ns, hi));
        while self.lower.back().is_some_and(|&(_, l)| l <= lo) {
            self.lower.pop_back();
        }
        self.lower.push_back((recv_ns, lo));
        self.recent.push_back(recv_ns);
        if self.recent.len() > MIN_SAMPLES {
            self.recent.pop_front();
        }
        // The newest sample is in both deques, so neither empties.
        let oldest = recv_ns.saturating_sub(WINDOW_NS).min(self.recent.front().copied().unwrap_or(recv_ns));
        while self.upper.front().is_some_and(|&(at, _)| at < oldest) {
            self.upper.pop_front();
        }
        while self.lower.front().is_some_and(|&(at, _)| at < oldest) {
            self.lower.pop_front();
        }
    }

    /// Estimated local time at which tick `tick` was published, ns.
    pub fn publish_ns(&self, tick: u64) -> Option<f64> {
        self.upper.front().map(|&(_, u)| u + tick as f64 * self.period_ns)
    }

    /// How much the estimate may exceed the true publish time, ns (see the module docs).
    pub fn error_bound_ns(&self) -> Option<f64> {
        match (self.upper.front(), self.lower.front()) {
            (Some(&(_, u)), Some(&(_, l))) => Some((u - l).max(0.0)),
            _ => None,
        }
    }

    /// `arrival − publish(tick)`, ns (may be negative within the error bound).
    #[cfg(test)]
    pub fn lateness_ns(&self, tick: u64, arrival_ns: u64) -> Option<f64> {
        self.publish_ns(tick).map(|p| arrival_ns as f64 - p)
    }
}

/// One [`TickClock`] fed by every bot. Observing takes a mutex (a few thousand Pongs a second
/// at most); reading the estimate (every frame) is two relaxed atomic loads.
#[derive(Debug)]
pub struct SharedClock {
    inner: Mutex<TickClock>,
    /// `f64` bits of the reference `R` (ns), `NaN` until the first sample.
    reference: AtomicU64,
    /// `f64` bits of the error bound (ns).
    bound: AtomicU64,
    period_ns: f64,
}

impl SharedClock {
    /// For a world ticking at `tick_rate_hz`.
    pub fn new(tick_rate_hz: f32) -> Self {
        let c = TickClock::new(tick_rate_hz);
        SharedClock {
            period_ns: c.period_ns,
            inner: Mutex::new(c),
            reference: AtomicU64::new(f64::NAN.to_bits()),
            bound: AtomicU64::new(f64::NAN.to_bits()),
        }
    }

    /// See [`TickClock::observe`].
    pub fn observe(&self, send_ns: u64, recv_ns: u64, server_tick: u64) {
        let mut c = match self.inner.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        c.observe(send_ns, recv_ns, server_tick);
        if let (Some(r), Some(b)) = (c.publish_ns(0), c.error_bound_ns()) {
            self.reference.store(r.to_bits(), Ordering::Relaxed);
            self.bound.store(b.to_bits(), Ordering::Relaxed);
        }
    }

    /// `(arrival − publish(tick), error bound)`, ns, once there is an estimate.
    pub fn lateness_ns(&self, tick: u64, arrival_ns: u64) -> Option<(f64, f64)> {
        let r = f64::from_bits(self.reference.load(Ordering::Relaxed));
        let b = f64::from_bits(self.bound.load(Ordering::Relaxed));
        (r.is_finite() && b.is_finite()).then_some((arrival_ns as f64 - (r + tick as f64 * self.period_ns), b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server publishing tick `T` at `r + T·p + late(T)`; a ping reaching it at server time
    /// `s` sees the newest published tick.
    fn pong(r: f64, p: f64, send: u64, one_way: u64, late: impl Fn(u64) -> f64) -> (u64, u64, u64) {
        let s = (send + one_way) as f64;
        let mut tick = ((s - r) / p).floor() as u64;
        while tick > 0 && r + tick as f64 * p + late(tick) > s {
            tick -= 1;
        }
        (send, send + 2 * one_way, tick)
    }

    #[test]
    fn converges_within_its_bound() {
        let (r, p) = (3_123_456.0, 50e6);
        let mut c = TickClock::new(20.0);
        assert!(c.publish_ns(5).is_none());
        // Pings at phases spread over the tick, 200 µs each way.
        let mut send = 1_000_000_000u64;
        for i in 0..12u64 {
            let (s, rv, t) = pong(r, p, send, 200_000, |_| 0.0);
            c.observe(s, rv, t);
            let (est, bound) = (c.publish_ns(0).unwrap(), c.error_bound_ns().unwrap());
            assert!(est >= r && est - r <= bound + 1.0, "sample {i}: est {est} bound {bound}");
            send += 300_000_000 + 7_300_000 * i;
        }
        assert!(c.error_bound_ns().unwrap() < 5e6, "bound {}", c.error_bound_ns().unwrap());
        // A frame of tick 100 arriving 2 ms after its publish.
        let late = c.lateness_ns(100, (r + 100.0 * p + 2e6) as u64).unwrap();
        assert!(late <= 2e6 + 1.0 && late >= 2e6 - c.error_bound_ns().unwrap() - 1.0, "{late}");
    }

    #[test]
    fn late_ticks_never_overstate_lateness() {
        let (r, p) = (0.0, 50e6);
        let late = |t: u64| if t % 3 == 0 { 30e6 } else { 0.0 };
        let mut c = TickClock::new(20.0);
        let mut send = 1_000_000_000u64;
        for i in 0..40u64 {
            let (s, rv, t) = pong(r, p, send, 100_000, late);
            c.observe(s, rv, t);
            assert!(c.publish_ns(0).unwrap() >= r, "sample {i}");
            send += 100_000_000 + 3_700_000 * i;
        }
        // On-time ticks were sampled at many phases: the estimate is close.
        assert!(c.publish_ns(0).unwrap() - r < 5e6, "{}", c.publish_ns(0).unwrap());
    }

    #[test]
    fn single_sample_bound_is_period_plus_rtt() {
        let mut c = TickClock::new(20.0);
        c.observe(1_000_000_000, 1_001_000_000, 10);
        assert!((c.error_bound_ns().unwrap() - 51e6).abs() < 1.0);
        c.observe(5, 4, 3); // reversed: ignored
        c.observe(5, 6, 0); // not subscribed: ignored
        assert!((c.error_bound_ns().unwrap() - 51e6).abs() < 1.0);
    }

    /// Feeds `n` on-time pongs of a 20 Hz server with reference `r` (100 µs each way), the
    /// `i`-th ping sent at `*send`, which then advances by `gap(i)`.
    fn feed(c: &mut TickClock, r: f64, send: &mut u64, n: u64, gap: impl Fn(u64) -> u64) {
        for i in 0..n {
            let (s, rv, t) = pong(r, 50e6, *send, 100_000, |_| 0.0);
            c.observe(s, rv, t);
            *send += gap(i);
        }
    }

    #[test]
    fn follows_a_schedule_shift_after_the_window() {
        let mut c = TickClock::new(20.0);
        let mut send = 2_000_000_000u64;
        feed(&mut c, 0.0, &mut send, 20, |i| 300_000_000 + 3_000_000 * i);
        // The server dropped 3 ticks: the reference moves 150 ms later.
        let r2 = 150e6;
        feed(&mut c, r2, &mut send, 40, |i| 300_000_000 + 11_000_000 * (i % 5));
        let est = c.publish_ns(0).unwrap();
        assert!(est >= r2 && est - r2 <= c.error_bound_ns().unwrap() + 1.0, "est {est}");
    }

    #[test]
    fn a_dense_swarm_follows_dropped_ticks_within_about_a_second() {
        let mut c = TickClock::new(20.0);
        // 100 samples a second (50 bots pinging twice a second) on schedule R = 0 ...
        let mut send = 2_000_000_000u64;
        let gap = |i: u64| 10_000_000 + 37_000 * (i % 7);
        feed(&mut c, 0.0, &mut send, 300, gap);
        assert!(c.publish_ns(0).unwrap() < 1e6);
        // ... then the server drops 10 ticks: the schedule moves 500 ms later; 1.2 s of samples.
        let r2 = 500e6;
        feed(&mut c, r2, &mut send, 119, gap);
        // The old schedule (R = 0) has left the estimate; the new one is within the bound.
        let est = c.publish_ns(0).unwrap();
        assert!(est >= r2, "estimate {est} still holds the old schedule");
        assert!(est - r2 <= c.error_bound_ns().unwrap() + 1.0 && est - r2 < 10e6, "estimate {est}");
    }

    #[test]
    fn shared_clock_publishes_the_estimate() {
        let c = SharedClock::new(20.0);
        assert!(c.lateness_ns(1, 1).is_none());
        c.observe(1_000_000_000, 1_001_000_000, 10);
        let (late, bound) = c.lateness_ns(10, 1_001_000_000).unwrap();
        assert!((bound - 51e6).abs() < 1.0);
        assert!(late.abs() < 1.0);
    }
}
