//! `--status FILE`: the run's live status as JSON, rewritten whole (a temporary file beside it,
//! renamed over it, so a reader never sees half of one) at every beat of the display (500 ms)
//! and once more when the run is over. A script can watch the run through it and stop it
//! (SIGTERM, see `stop.rs`) once what it waits for has happened, e.g. every bot commanded its
//! agents on the server its world moved to (`bots_commanded_after_follow`).

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::report::{commanded_after_follow, round3};
use crate::stats::{BotRow, C, Stats};

/// The run so far.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Seconds since the first bot's start.
    pub elapsed_s: f64,
    /// The run has ended (its deadline, or told to stop): the bots are leaving.
    pub stopping: bool,
    /// The bots have left; this is the run's last status (the report follows).
    pub done: bool,
    /// Bots asked for.
    pub bots: u64,
    /// Bots that completed Hello → Welcome.
    pub bots_connected: u64,
    /// Bots connected now.
    pub bots_online: u64,
    /// Connections that ended before the run did.
    pub disconnects: u64,
    /// Commands sent.
    pub commands_sent: u64,
    /// Their results (counted in batches, every 250 ms per bot).
    pub command_results: u64,
    /// Follows so far, summed over bots (as the report's `follows`).
    pub follows: u64,
    /// Bots, each counted once, that followed their world and had a command acknowledged since
    /// their last follow (as the report's `bots_commanded_after_follow`).
    pub bots_commanded_after_follow: u64,
    /// Each bot's figures, by bot index.
    pub per_bot: Vec<BotRow>,
}

impl Status {
    /// The status of a run of `bots` bots, `elapsed_s` in.
    pub fn of(stats: &Stats, bots: usize, elapsed_s: f64, stopping: bool, done: bool) -> Self {
        let per_bot = stats.per_bot();
        Status {
            elapsed_s: round3(elapsed_s),
            stopping,
            done,
            bots: bots as u64,
            bots_connected: stats.get(C::BotsConnected),
            bots_online: stats.get(C::BotsOnline),
            disconnects: stats.get(C::Disconnects),
            commands_sent: stats.get(C::CommandsSent),
            command_results: stats.get(C::CommandResults),
            follows: stats.get(C::Follows),
            bots_commanded_after_follow: commanded_after_follow(&per_bot),
            per_bot,
        }
    }

    /// Writes the status to `path` whole: a temporary file beside it, renamed over it.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let json = serde_json::to_string(self)?;
        std::fs::write(&tmp, json + "\n").with_context(|| format!("writing --status {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to --status {}", tmp.display(), path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_written_whole_and_counts_bots_commanded_after_a_follow() {
        let s = Stats::new(2);
        s.add(C::BotsConnected, 2);
        s.followed(0);
        s.followed(1);
        s.acked(1);
        let dir = std::env::temp_dir().join(format!("steer-swarm-status-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("status.json");
        Status::of(&s, 2, 1.25, false, false).write(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!((v["bots"].as_u64(), v["bots_connected"].as_u64(), v["follows"].as_u64()), (Some(2), Some(2), Some(0)));
        assert_eq!(v["bots_commanded_after_follow"].as_u64(), Some(1), "{v}");
        assert_eq!(v["per_bot"][1]["acked_since_follow"].as_u64(), Some(1), "{v}");
        assert_eq!(v["elapsed_s"].as_f64(), Some(1.25));
        assert!(!dir.join("status.json.tmp").exists(), "the temporary file is renamed, not left");
        // A directory that does not exist: an error naming the flag, no file.
        let err = Status::of(&s, 2, 0.0, true, true).write(&dir.join("no-such-dir").join("s.json")).unwrap_err();
        assert!(format!("{err:#}").contains("--status"), "{err:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
