//! Shared measurements of the swarm.
//!
//! Bots never take a lock per event: each bot owns a [`Recorder`] that counts into a plain
//! array and buffers histogram samples, and flushes both into the shared [`Stats`] every few
//! hundred milliseconds (atomics for the counters, one short mutex hold per flush for the
//! histograms). The live display reads the atomics; the report merges the histograms once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

/// Counters, one per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C {
    /// Bots that completed Hello → Welcome.
    BotsConnected,
    /// Bots whose connection or Hello failed.
    ConnectFailures,
    /// Bots currently connected (gauge: +1 on Welcome, -1 on end).
    BotsOnline,
    /// Connections that ended before the run did (close frame, error or stall).
    Disconnects,
    /// Keyframes and deltas received.
    Frames,
    /// Keyframes received.
    Keyframes,
    /// Deltas received.
    Deltas,
    /// Events received.
    Events,
    /// Bytes of every WebSocket message received.
    BytesIn,
    /// Bytes of keyframes and deltas.
    FrameBytes,
    /// Agent records carried by frames (keyframe agents + delta changed + delta entered).
    AgentUpdates,
    /// Frames that steer-proto could not decode.
    DecodeErrors,
    /// Frames whose checksum did not match the state after applying them.
    ChecksumErrors,
    /// Deltas that did not chain on the held state (and other apply errors).
    ChainBreaks,
    /// Re-subscriptions sent to resync after an error.
    Resyncs,
    /// Area moves (`--pan-every`).
    Pans,
    /// Commands sent (MoveTo and behaviour commands).
    CommandsSent,
    /// Command results received for them.
    CommandResults,
    /// Command results with an error outcome (any request kind).
    CommandErrors,
    /// Requests without a result within the timeout.
    CommandTimeouts,
    /// Results whose request id matched nothing outstanding.
    UnmatchedResults,
    /// `Error` messages without a request id.
    ServerErrors,
    /// Pongs received.
    Pongs,
    /// Distinct server ticks a bot saw frames for.
    TicksSeen,
    /// Server ticks skipped between two ticks a bot saw.
    TickGaps,
    /// Lateness samples below zero (estimator error), recorded as 0.
    NegativeLateness,
    /// MoveTo effects not observed within the timeout (agent out of view, or no effect).
    EffectTimeouts,
    /// Agents spawned by bots.
    AgentsSpawned,
    /// Bots holding a subscription (gauge: +1 on the first `Subscribed`, -1 on end).
    Subscribed,
    /// WebSocket payload bytes received inside the measured window (see `BotConfig::window_ns`).
    WindowBytes,
    /// Agents that moved, inside the window: delta `changed` + `entered` records.
    WindowMoved,
    /// Distinct ticks seen inside the window, summed over bots.
    WindowTicks,
    /// Bots whose join completed (a keyframe of every subscribed cell).
    Joins,
    /// Bytes received from the first Subscribe until a keyframe of every subscribed cell.
    JoinBytes,
    /// Agents in those first keyframes.
    JoinAgents,
    /// `cells` messages whose head only was read (`--skim`), not decoded or verified.
    Skimmed,
    /// Follows: a bot followed its world to another server (a `moved` message) and resumed
    /// there (counted once per follow).
    Follows,
    /// Follows after which the bot had a command acknowledged (an outcome that is not an
    /// error) on the server it followed its world to: counted once per follow.
    CommandedAfterFollow,
}

impl C {
    /// Number of counters.
    pub const N: usize = C::CommandedAfterFollow as usize + 1;
}

/// Histogram metrics, one per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H {
    /// TCP + WebSocket handshake + Hello → Welcome, µs.
    ConnectUs,
    /// Command sent → its CommandResult, µs.
    CmdRttUs,
    /// MoveTo sent → first frame with the agent's velocity turned toward the target, µs.
    CmdEffectUs,
    /// Frame arrival − estimated publish time of its tick, µs (see `clock`).
    LatenessUs,
    /// Ping → Pong, µs.
    PingRttUs,
    /// Bytes of one keyframe or delta.
    FrameBytes,
    /// Error bound of the shared clock estimate when lateness was recorded, µs.
    ClockErrorUs,
    /// Arrival of a tick's state − arrival of the previous tick's, per bot, µs (a handoff's
    /// pause shows as its largest sample).
    TickIntervalUs,
}

impl H {
    /// Number of histograms.
    pub const N: usize = H::TickIntervalUs as usize + 1;
}

/// Histograms of the whole swarm.
pub struct Hists(pub Vec<Histogram<u64>>);

impl Hists {
    fn new() -> Self {
        // Auto-resizing, 3 significant figures: small until large values arrive.
        Hists((0..H::N).map(|_| new_hist()).collect())
    }

    /// One histogram.
    pub fn get(&self, h: H) -> &Histogram<u64> {
        &self.0[h as usize]
    }
}

/// An empty auto-resizing histogram with 3 significant figures.
pub fn new_hist() -> Histogram<u64> {
    match Histogram::new(3) {
        Ok(h) => h,
        Err(e) => unreachable!("3 significant figures are valid: {e}"),
    }
}

/// Everything the bots share.
pub struct Stats {
    counters: [AtomicU64; C::N],
    hists: Mutex<Hists>,
    close_codes: Mutex<BTreeMap<String, u64>>,
    error_codes: Mutex<BTreeMap<String, u64>>,
    notes: Mutex<(u64, Vec<String>)>,
    /// Each bot's own figures, by bot index.
    bots: Box<[BotFigures]>,
}

/// One bot's own figures (the live status's and the report's `per_bot` rows). Kept apart
/// from the sums and updated directly: they change once per command result or follow.
#[derive(Debug, Default)]
struct BotFigures {
    follows: AtomicU64,
    acked: AtomicU64,
    acked_since_follow: AtomicU64,
}

/// One bot's figures as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BotRow {
    /// Times the bot followed its world to another server (`moved`) and resumed there.
    pub follows: u64,
    /// Its commands acknowledged (a result that is not an error).
    pub commands_acked: u64,
    /// Of them, those acknowledged since its last follow: on the server its world moved to.
    pub acked_since_follow: u64,
}

impl Stats {
    /// Empty, with the figures of `bots` bots.
    pub fn new(bots: usize) -> Self {
        Stats {
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            hists: Mutex::new(Hists::new()),
            close_codes: Mutex::new(BTreeMap::new()),
            error_codes: Mutex::new(BTreeMap::new()),
            notes: Mutex::new((0, Vec::new())),
            bots: (0..bots).map(|_| BotFigures::default()).collect(),
        }
    }

    /// Bot `index` followed its world to another server: its count since the follow starts
    /// again (before the follow is counted, so a reader never sees the new follow with the
    /// old server's count).
    pub fn followed(&self, index: usize) {
        if let Some(b) = self.bots.get(index) {
            b.acked_since_follow.store(0, Ordering::SeqCst);
            b.follows.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A command of bot `index` was acknowledged.
    pub fn acked(&self, index: usize) {
        if let Some(b) = self.bots.get(index) {
            b.acked.fetch_add(1, Ordering::Relaxed);
            b.acked_since_follow.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Every bot's figures, by bot index.
    pub fn per_bot(&self) -> Vec<BotRow> {
        self.bots
            .iter()
            .map(|b| BotRow {
                follows: b.follows.load(Ordering::SeqCst),
                commands_acked: b.acked.load(Ordering::Relaxed),
                acked_since_follow: b.acked_since_follow.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// A counter's value.
    pub fn get(&self, c: C) -> u64 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    /// Adds to a counter directly (rare events).
    pub fn add(&self, c: C, n: u64) {
        self.counters[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts from a gauge counter.
    pub fn sub(&self, c: C, n: u64) {
        self.counters[c as usize].fetch_sub(n, Ordering::Relaxed);
    }

    /// Counts a disconnect by close code (`"1000"`, …) or cause (`"reset"`, `"stalled"`).
    pub fn disconnect(&self, why: String) {
        self.add(C::Disconnects, 1);
        if let Ok(mut m) = self.close_codes.lock() {
            *m.entry(why).or_default() += 1;
        }
    }

    /// Counts an error outcome by its code name.
    pub fn error_code(&self, code: &str) {
        if let Ok(mut m) = self.error_codes.lock() {
            *m.entry(code.to_string()).or_default() += 1;
        }
    }

    /// Keeps the first [`Stats::NOTES`] diagnostic messages (and counts all).
    pub fn note(&self, msg: String) {
        if let Ok(mut n) = self.notes.lock() {
            n.0 += 1;
            if n.1.len() < Self::NOTES {
                n.1.push(msg);
            }
        }
    }

    /// Diagnostics kept, and how many there were in all.
    pub fn notes(&self) -> (u64, Vec<String>) {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Diagnostics kept.
    pub const NOTES: usize = 12;

    /// Disconnect causes.
    pub fn close_codes(&self) -> BTreeMap<String, u64> {
        self.close_codes.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Error outcomes by code.
    pub fn error_codes(&self) -> BTreeMap<String, u64> {
        self.error_codes.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Runs `f` on the merged histograms.
    pub fn with_hists<T>(&self, f: impl FnOnce(&Hists) -> T) -> T {
        match self.hists.lock() {
            Ok(h) => f(&h),
            Err(p) => f(&p.into_inner()),
        }
    }
}

/// One bot's unsynchronised counters and sample buffer. A sample equal to one of the last
/// [`Recorder::LOOKBACK`] buffered is counted there, not stored: the deltas of one batched tick
/// message (hundreds for a whole-world subscriber) share one lateness and clock bound, and
/// their sizes repeat, so the buffer and the shared histograms' lock are touched far less.
pub struct Recorder {
    counts: [u64; C::N],
    /// (histogram, value, times).
    samples: Vec<(H, u64, u64)>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// Samples buffered before a flush is forced.
    const BUFFER: usize = 1024;
    /// How far back [`Recorder::record`] looks for an equal sample.
    const LOOKBACK: usize = 8;

    /// Empty.
    pub fn new() -> Self {
        Recorder { counts: [0; C::N], samples: Vec::with_capacity(64) }
    }

    /// Adds to a counter.
    #[inline]
    pub fn add(&mut self, c: C, n: u64) {
        self.counts[c as usize] += n;
    }

    /// Records a sample; flushes into `stats` when the buffer is full.
    #[inline]
    pub fn record(&mut self, h: H, v: u64, stats: &Stats) {
        let from = self.samples.len().saturating_sub(Self::LOOKBACK);
        if let Some(same) = self.samples[from..].iter_mut().rev().find(|l| l.0 == h && l.1 == v) {
            same.2 += 1;
            return;
        }
        self.samples.push((h, v, 1));
        if self.samples.len() >= Self::BUFFER {
            self.flush(stats);
        }
    }

    /// Moves everything into `stats`.
    pub fn flush(&mut self, stats: &Stats) {
        for (i, n) in self.counts.iter_mut().enumerate() {
            if *n != 0 {
                stats.counters[i].fetch_add(*n, Ordering::Relaxed);
                *n = 0;
            }
        }
        if self.samples.is_empty() {
            return;
        }
        let mut g = match stats.hists.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for (h, v, n) in self.samples.drain(..) {
            // Auto-resizing histograms only refuse values beyond u64 range handling; saturate.
            let _ = g.0[h as usize].record_n(v.max(1), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_flushes_counters_and_samples() {
        let s = Stats::new(0);
        let mut r = Recorder::new();
        r.add(C::Frames, 3);
        r.record(H::CmdRttUs, 1500, &s);
        r.record(H::CmdRttUs, 2500, &s);
        assert_eq!(s.get(C::Frames), 0);
        r.flush(&s);
        assert_eq!(s.get(C::Frames), 3);
        s.with_hists(|h| {
            assert_eq!(h.get(H::CmdRttUs).len(), 2);
            assert!(h.get(H::CmdRttUs).max() >= 2499);
        });
        r.flush(&s);
        assert_eq!(s.get(C::Frames), 3);
        // Equal samples close together are kept as counts: same histogram as one record each.
        for v in [7000, 7000, 7000, 9000, 7000] {
            r.record(H::LatenessUs, v, &s);
            r.record(H::ClockErrorUs, 5, &s);
        }
        r.record(H::FrameBytes, 7000, &s);
        assert_eq!(r.samples.len(), 4);
        // Beyond the lookback an equal sample is stored again.
        for v in 0..Recorder::LOOKBACK as u64 {
            r.record(H::PingRttUs, 100 + v, &s);
        }
        r.record(H::LatenessUs, 7000, &s);
        assert_eq!(r.samples.len(), 5 + Recorder::LOOKBACK);
        r.flush(&s);
        s.with_hists(|h| {
            let l = h.get(H::LatenessUs);
            assert_eq!((l.len(), l.count_at(7000), l.count_at(9000)), (6, 5, 1));
            assert_eq!((h.get(H::ClockErrorUs).len(), h.get(H::ClockErrorUs).count_at(5)), (5, 5));
            assert_eq!((h.get(H::FrameBytes).len(), h.get(H::PingRttUs).len()), (1, Recorder::LOOKBACK as u64));
        });
        s.disconnect("4008".into());
        assert_eq!(s.close_codes().get("4008"), Some(&1));
    }

    #[test]
    fn per_bot_figures_count_acks_since_the_last_follow() {
        let s = Stats::new(3);
        s.acked(0);
        s.acked(0);
        s.acked(2);
        s.followed(0);
        assert_eq!(s.per_bot()[0], BotRow { follows: 1, commands_acked: 2, acked_since_follow: 0 });
        s.acked(0);
        s.followed(1);
        s.followed(1);
        // A bot index beyond the run's bots is ignored, not a panic.
        s.acked(3);
        s.followed(7);
        let rows = s.per_bot();
        assert_eq!(rows, vec![
            BotRow { follows: 1, commands_acked: 3, acked_since_follow: 1 },
            BotRow { follows: 2, commands_acked: 0, acked_since_follow: 0 },
            BotRow { follows: 0, commands_acked: 1, acked_since_follow: 1 },
        ]);
        assert_eq!(crate::report::commanded_after_follow(&rows), 1);
    }
}
