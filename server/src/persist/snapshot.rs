//! The snapshot file: a durable world's saved form with what the runner needs beside it.

use serde::{Deserialize, Serialize};

/// First 8 bytes of a snapshot file.
pub const SNAP_MAGIC: &[u8; 8] = b"STEERSNP";
/// Snapshot format version. Version 2 holds the world itself; version 1 (read, no longer
/// written) only pointed at the log to re-run.
pub const SNAP_VERSION: u16 = 2;
/// Snapshot header: magic, version u16 LE, 2 zero bytes, payload length u32 LE, CRC-32 of the
/// payload u32 LE; then the payload: the length of the metadata u32 LE, the metadata (JSON of
/// [`SnapshotMeta`]), and the world's saved form (`World::save`) to the end.
pub const SNAP_HEADER: usize = 20;

/// What a snapshot records besides the world: where in the log it was taken, how to check it,
/// and the runner's state that is not the sim's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    /// The world's name.
    pub world: String,
    /// The sim tick it was taken at.
    pub tick: u64,
    /// `state_hash` and `exact_hash` at `tick`.
    pub state_hash: u64,
    pub exact_hash: u64,
    /// The segment holding the world's last `Start` (a version-1 snapshot's world is the log
    /// re-run from there).
    pub base_segment: u64,
    /// The segment being written when it was taken.
    pub segment: u64,
    /// Records of `segment` that come before the snapshot: the log after it (its tail) begins
    /// with the next record.
    #[serde(default)]
    pub records: u64,
    /// The world was paused.
    pub paused: bool,
    /// The name of the scenario the world was last loaded from.
    pub scenario_name: Option<String>,
    /// Seconds since the Unix epoch when it was taken.
    pub taken_unix: u64,
    /// The runner's state (version 2).
    #[serde(default)]
    pub runner: Option<RunnerState>,
}

/// A durable world's runner state that is not in the sim world: what a reset goes back to,
/// who owns which agent, and the players' sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunnerState {
    /// The scenario of the world's last load or reset (JSON), with the caps it was built with.
    pub scenario: String,
    pub max_agents: u64,
    pub max_spawn: u64,
    /// Owned agents: (agent, player, team).
    pub owners: Vec<(u32, String, Option<String>)>,
    /// The sessions subscribed to the world or owning its agents.
    pub sessions: Vec<StoredSession>,
}

/// A player's session as a snapshot keeps it: resumable with its token after a restart (or on
/// another server), within the grace left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSession {
    /// SHA-256 of the resume token, hex (the token itself is never stored).
    pub token_sha256: String,
    /// Who: player, role (`admin`, `player`, `observer`), team, worlds allowed, the expiry of
    /// the player token the session was opened with.
    pub player: String,
    pub role: steer_proto::Role,
    pub team: Option<String>,
    pub worlds: Option<Vec<String>>,
    pub expires: Option<u64>,
    /// Its subscriptions to this world: area and `every_n_ticks`.
    pub subs: Vec<(steer_proto::Area, u32)>,
    /// Milliseconds it stays resumable, counted from when the world runs again: what was left
    /// of a dropped session's grace, the whole grace for a connected one.
    pub grace_ms: u64,
}

/// A decoded snapshot: its metadata and (version 2) the world's saved form.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot<'a> {
    pub meta: SnapshotMeta,
    pub world: Option<&'a [u8]>,
}

/// The bytes of a snapshot file: `meta` and the world's saved form `world`.
pub fn encode_snapshot(meta: &SnapshotMeta, world: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(meta).unwrap_or_default();
    let mut out = Vec::with_capacity(SNAP_HEADER + 4 + json.len() + world.len());
    out.extend_from_slice(SNAP_MAGIC);
    out.extend_from_slice(&SNAP_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&((4 + json.len() + world.len()) as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(world);
    let crc = crc32fast::hash(&out[SNAP_HEADER..]);
    out[16..20].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Reads a snapshot file; the error says what is wrong with it.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot<'_>, String> {
    if bytes.len() < SNAP_HEADER || &bytes[..8] != SNAP_MAGIC {
        return Err("not a steerd snapshot (bad magic)".into());
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !(1..=SNAP_VERSION).contains(&version) {
        return Err(format!("snapshot version {version} is not supported (this build reads 1 to {SNAP_VERSION})"));
    }
    let len = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    let crc = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    let payload = &bytes[SNAP_HEADER..];
    if payload.len() != len {
        return Err(format!("payload is {} bytes, the header says {len}", payload.len()));
    }
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    if version == 1 {
        let meta = serde_json::from_slice(payload).map_err(|e| format!("payload: {e}"))?;
        return Ok(Snapshot { meta, world: None });
    }
    let Some((n, rest)) = payload.split_first_chunk::<4>() else { return Err("payload too short".into()) };
    let n = u32::from_le_bytes(*n) as usize;
    if n > rest.len() {
        return Err(format!("metadata of {n} bytes in a payload of {}", rest.len()));
    }
    let (json, world) = rest.split_at(n);
    let meta: SnapshotMeta = serde_json::from_slice(json).map_err(|e| format!("metadata: {e}"))?;
    if meta.runner.is_none() {
        return Err("a version-2 snapshot without the runner's state".into());
    }
    Ok(Snapshot { meta, world: Some(world) })
}

/// The segment from which a snapshot needs the log: its own for one holding the world, the
/// base's for a version-1 one.
pub fn needs_log_from(s: &Snapshot<'_>) -> u64 {
    if s.world.is_some() { s.meta.segment } else { s.meta.base_segment }
}
