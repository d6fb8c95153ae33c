//! When the run ends: at `--duration` after the first bot's start, or earlier when the swarm
//! is told to stop (SIGTERM or SIGINT / Ctrl-C). Either way every bot stops sending, despawns
//! its agents and closes with 1000, and the report is made and written as at the deadline; a
//! second signal ends the process at once (exit 130, no report).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::{Instant as TokioInstant, sleep_until};

/// The run's end, shared by every bot and the watcher.
#[derive(Debug, Clone)]
pub struct Stop {
    deadline: TokioInstant,
    told: Arc<watch::Sender<bool>>,
}

impl Stop {
    /// A run that ends at `deadline` unless told to stop before.
    pub fn new(deadline: TokioInstant) -> Self {
        Stop { deadline, told: Arc::new(watch::Sender::new(false)) }
    }

    /// Ends the run now.
    pub fn now(&self) {
        self.told.send_replace(true);
    }

    /// Whether the run has ended (deadline passed or told to stop).
    pub fn done(&self) -> bool {
        *self.told.borrow() || TokioInstant::now() >= self.deadline
    }

    /// Completes when the run ends.
    pub fn until(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut told = self.told.subscribe();
        let deadline = self.deadline;
        async move {
            let told = async move {
                // The sender lives in `self` (shared) and outlives the run; were it dropped,
                // only the deadline would end the run.
                if told.wait_for(|t| *t).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = sleep_until(deadline) => {}
                () = told => {}
            }
        }
    }
}

/// Listens for SIGTERM and SIGINT (Ctrl-C) from now on: the first ends the run through `stop`
/// (said on stderr unless `quiet`), the second exits at once with 130. Call it inside the
/// runtime, before the bots start, so a signal during the ramp already stops the run.
pub fn on_signals(stop: Stop, quiet: bool) -> anyhow::Result<()> {
    let mut signals = Signals::new()?;
    tokio::spawn(async move {
        signals.next().await;
        if !quiet {
            eprintln!("steer-swarm: told to stop: bots despawn their agents and close, then the report (a second signal quits at once)");
        }
        stop.now();
        signals.next().await;
        eprintln!("steer-swarm: told to stop again: quitting without a report");
        std::process::exit(130);
    });
    Ok(())
}

/// The stop signals of this platform.
#[cfg(unix)]
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> anyhow::Result<Self> {
        use anyhow::Context;
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        let int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
        Ok(Signals { term, int })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> anyhow::Result<Self> {
        Ok(Signals)
    }

    async fn next(&mut self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_run_ends_at_its_deadline_or_when_told() {
        // At its deadline: not before (however late this thread runs, the wait ends no sooner
        // than the deadline), and done from then on.
        let start = TokioInstant::now();
        let s = Stop::new(start + Duration::from_millis(200));
        s.until().await;
        assert!(s.done());
        assert!(start.elapsed() >= Duration::from_millis(200), "ended before the deadline");

        // Told to stop: ends then, long before its deadline (an hour), and not done before.
        let s = Stop::new(TokioInstant::now() + Duration::from_secs(3600));
        assert!(!s.done(), "done an hour before its deadline, untold");
        let waiter = s.until();
        let other = s.clone();
        let told = tokio::spawn(async move { other.now() });
        tokio::time::timeout(Duration::from_secs(60), waiter).await.expect("the run did not end when told");
        assert!(s.done());
        // A run told to stop stays stopped: a later wait ends at once.
        tokio::time::timeout(Duration::from_secs(60), s.until()).await.expect("a stopped run's wait ended");
        told.await.unwrap();
    }
}
