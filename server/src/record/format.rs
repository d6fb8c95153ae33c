//! The recording file: a header, then chunks of records, each chunk with its length and CRC-32
//! (see `server/RECORDING.md`).
//!
//! **Invariant:** a reader never trusts a chunk whose checksum fails or whose bytes are cut
//! short: it stops there and keeps every chunk before it (a crash loses at most the chunk being
//! written).

use crate::sim::codec::{Dec, DecodeError, Enc, decode_command, encode_command};
use crate::sim::world::Command;

/// First 8 bytes of every recording.
pub const MAGIC: &[u8; 8] = b"STEERREC";
/// Format version (bump on any change to the records or the command codec). Version 2 added the
/// `Owner` record, version 3 the `Sessions` record (durable worlds' logs); a reader reads every
/// version from [`OLDEST_VERSION`] on.
pub const VERSION: u16 = 3;
/// The oldest version this build reads.
pub const OLDEST_VERSION: u16 = 1;
/// Header: magic, version (u16 LE), 6 reserved zero bytes.
pub const HEADER_LEN: usize = 16;
/// Largest chunk payload a reader accepts (a writer flushes long before).
pub const MAX_CHUNK: usize = 4 << 20;

/// The file header.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// A chunk as written: `len u32 LE`, `crc32 u32 LE` of the payload, the payload.
pub fn frame_chunk(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// One record. Ticks are the sim world's own tick (0 at each `Start`).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The world (re)starts here: built from `scenario` (JSON) with these caps. First record of
    /// a file, and again after every load/reset of the world.
    Start {
        /// Server caps the world was built with.
        max_agents: u64,
        max_spawn: u64,
        /// Ticks between checkpoints.
        hash_every: u64,
        /// Checkpoints carry per-agent digests.
        digests: bool,
        /// `scenario` is a snapshot of a running world (`PATCH` start), not the file it loaded.
        from_snapshot: bool,
        /// The scenario, as JSON (it holds the seed).
        scenario: String,
    },
    /// A command applied before step `tick` (i.e. when the world's tick was `tick`).
    Command { tick: u64, command: Command },
    /// The tick rate changed before step `tick`.
    TickRate { tick: u64, rate: f32 },
    /// Paused or resumed at `tick` (does not change the state; kept for the timeline).
    Paused { tick: u64, paused: bool },
    /// The state after `tick` steps.
    Check {
        tick: u64,
        /// `sim::hash::state_hash` (what `steerd simulate` prints).
        state_hash: u64,
        /// `sim::hash::exact_hash` (every bit of every agent's float state).
        exact_hash: u64,
        /// Per agent (id order): id and the low 32 bits of a hash of its exact state; empty
        /// unless the recording was started with digests.
        agents: Vec<(u32, u32)>,
    },
    /// The recording ended at `tick` (absent if the process died).
    End { tick: u64, reason: String },
    /// Agent `agent` now belongs to `player` (of `team`), or to nobody (`player` absent). Only
    /// a durable world's log has these (ownership is the runtime's, not the sim's): replays
    /// skip them, recovery rebuilds the owner map from them.
    Owner { tick: u64, agent: u32, player: Option<String>, team: Option<String> },
    /// The players' sessions a durable world keeps from now on (JSON of
    /// `persist::StoredSession`s: hashed resume tokens, who, the grace left), logged when their
    /// set changes. Replays skip them; recovery restores the last one.
    Sessions { tick: u64, sessions: String },
}

const T_START: u8 = 1;
const T_COMMAND: u8 = 2;
const T_TICK_RATE: u8 = 3;
const T_PAUSED: u8 = 4;
const T_CHECK: u8 = 5;
const T_END: u8 = 6;
const T_OWNER: u8 = 7;
const T_SESSIONS: u8 = 8;

impl Record {
    /// Appends the record's bytes.
    pub fn encode(&self, e: &mut Enc) {
        match self {
            Record::Start { max_agents, max_spawn, hash_every, digests, from_snapshot, scenario } => {
                e.u8(T_START);
                e.u64(*max_agents);
                e.u64(*max_spawn);
                e.u64(*hash_every);
                e.u8(u8::from(*digests) | (u8::from(*from_snapshot) << 1));
                e.str(scenario);
            }
            Record::Command { tick, command } => {
                e.u8(T_COMMAND);
                e.u64(*tick);
                encode_command(e, command);
            }
            Record::TickRate { tick, rate } => {
                e.u8(T_TICK_RATE);
                e.u64(*tick);
                e.f32(*rate);
            }
            Record::Paused { tick, paused } => {
                e.u8(T_PAUSED);
                e.u64(*tick);
                e.u8(u8::from(*paused));
            }
            Record::Check { tick, state_hash, exact_hash, agents } => {
                e.u8(T_CHECK);
                e.u64(*tick);
                e.fixed64(*state_hash);
                e.fixed64(*exact_hash);
                e.u64(agents.len() as u64);
                let mut prev = 0u32;
                for &(id, digest) in agents {
                    e.u64(u64::from(id.wrapping_sub(prev)));
                    e.fixed32(digest);
                    prev = id;
                }
            }
            Record::End { tick, reason } => {
                e.u8(T_END);
                e.u64(*tick);
                e.str(reason);
            }
            Record::Owner { tick, agent, player, team } => {
                e.u8(T_OWNER);
                e.u64(*tick);
                e.u64(u64::from(*agent));
                e.u8(u8::from(player.is_some()) | (u8::from(team.is_some()) << 1));
                if let Some(p) = player {
                    e.str(p);
                }
                if let Some(t) = team {
                    e.str(t);
                }
            }
            Record::Sessions { tick, sessions } => {
                e.u8(T_SESSIONS);
                e.u64(*tick);
                e.str(sessions);
            }
        }
    }

    /// Reads one record.
    pub fn decode(d: &mut Dec) -> Result<Record, DecodeError> {
        Ok(match d.u8()? {
            T_START => {
                let max_agents = d.u64()?;
                let max_spawn = d.u64()?;
                let hash_every = d.u64()?;
                let flags = d.u8()?;
                Record::Start { max_agents, max_spawn, hash_every, digests: flags & 1 != 0, from_snapshot: flags & 2 != 0, scenario: d.string()? }
            }
            T_COMMAND => {
                let tick = d.u64()?;
                Record::Command { tick, command: decode_command(d)? }
            }
            T_TICK_RATE => Record::TickRate { tick: d.u64()?, rate: d.f32()? },
            T_PAUSED => Record::Paused { tick: d.u64()?, paused: d.bool()? },
            T_CHECK => {
                let tick = d.u64()?;
                let state_hash = d.fixed64()?;
                let exact_hash = d.fixed64()?;
                let n = d.list_len()?;
                let mut agents = Vec::with_capacity(n.min(1 << 16));
                let mut prev = 0u32;
                for _ in 0..n {
                    let id = prev.wrapping_add(d.u32()?);
                    agents.push((id, d.fixed32()?));
                    prev = id;
                }
                Record::Check { tick, state_hash, exact_hash, agents }
            }
            T_END => Record::End { tick: d.u64()?, reason: d.string()? },
            T_OWNER => {
                let tick = d.u64()?;
                let agent = d.u32()?;
                let flags = d.u8()?;
                let player = if flags & 1 != 0 { Some(d.string()?) } else { None };
                let team = if flags & 2 != 0 { Some(d.string()?) } else { None };
                Record::Owner { tick, agent, player, team }
            }
            T_SESSIONS => Record::Sessions { tick: d.u64()?, sessions: d.string()? },
            t => return Err(d.err(format!("unknown record tag {t}"))),
        })
    }
}

/// Why a file is not a recording.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not a recording.
    #[error("not a steerd recording (bad magic)")]
    BadMagic,
    /// A version this build cannot read.
    #[error("recording format version {0} is not supported (this build reads versions {OLDEST_VERSION} to {VERSION})")]
    Version(u16),
    /// A chunk that passed its checksum does not decode.
    #[error("chunk {chunk}: {source}")]
    Decode {
        /// Index of the chunk.
        chunk: usize,
        /// What was wrong.
        source: DecodeError,
    },
}

/// A file read back.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Every record of every intact chunk, in order.
    pub records: Vec<Record>,
    /// Intact chunks.
    pub chunks: usize,
    /// Bytes after the last intact chunk (a torn or corrupt tail: ignored).
    pub torn_bytes: usize,
    /// Why reading stopped before the end of the file, if it did.
    pub torn_reason: Option<String>,
}

/// Reads a recording: every intact chunk; stops at the first torn or corrupt one.
pub fn parse(bytes: &[u8]) -> Result<Parsed, FormatError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(FormatError::Version(version));
    }
    let mut out = Parsed::default();
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < 8 {
            out.torn_reason = Some("chunk header cut short".into());
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_CHUNK {
            out.torn_reason = Some(format!("chunk length {len} exceeds {MAX_CHUNK}"));
            break;
        }
        let Some(payload) = rest.get(8..8 + len) else {
            out.torn_reason = Some("chunk cut short".into());
            break;
        };
        if crc32fast::hash(payload) != crc {
            out.torn_reason = Some("chunk checksum mismatch".into());
            break;
        }
        let mut d = Dec::new(payload);
        while !d.done() {
            let r = Record::decode(&mut d).map_err(|source| FormatError::Decode { chunk: out.chunks, source })?;
            out.records.push(r);
        }
        out.chunks += 1;
        pos += 8 + len;
    }
    out.torn_bytes = bytes.len() - pos.min(bytes.len());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(records: &[Vec<Record>]) -> Vec<u8> {
        let mut out = header().to_vec();
        for chunk in records {
            let mut e = Enc::default();
            for r in chunk {
                r.encode(&mut e);
            }
            out.extend(frame_chunk(&e.buf));
        }
        out
    }

    fn sample() -> Vec<Vec<Record>> {
        vec![
            vec![Record::Start { max_agents: 10, max_spawn: 5, hash_every: 20, digests: true, from_snapshot: false, scenario: "{}".into() }],
            vec![
                Record::Command { tick: 3, command: Command::Despawn(4) },
                Record::TickRate { tick: 3, rate: 30.0 },
                Record::Paused { tick: 4, paused: true },
                Record::Check { tick: 20, state_hash: 1, exact_hash: u64::MAX, agents: vec![(1, 7), (5, u32::MAX), (9, 0)] },
            ],
            vec![Record::End { tick: 25, reason: "done".into() }],
        ]
    }

    #[test]
    fn records_round_trip_through_chunks() {
        let p = parse(&file(&sample())).unwrap();
        assert_eq!(p.records, sample().concat());
        assert_eq!((p.chunks, p.torn_bytes, p.torn_reason), (3, 0, None));
    }

    #[test]
    fn a_torn_or_corrupt_last_chunk_loses_only_that_chunk() {
        let whole = file(&sample());
        let two = file(&sample()[..2]).len();
        // Every cut inside the last chunk keeps the first two chunks.
        for cut in two + 1..whole.len() {
            let p = parse(&whole[..cut]).unwrap();
            assert_eq!(p.chunks, 2, "cut at {cut}");
            assert_eq!(p.records, sample()[..2].concat());
            assert_eq!(p.torn_bytes, cut - two);
            assert!(p.torn_reason.is_some());
        }
        // A flipped bit in the last chunk's payload fails its checksum.
        let mut bad = whole.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x10;
        let p = parse(&bad).unwrap();
        assert_eq!((p.chunks, p.torn_reason.as_deref()), (2, Some("chunk checksum mismatch")));
    }

    #[test]
    fn wrong_magic_or_version_is_refused() {
        let mut f = file(&sample());
        assert!(matches!(parse(&f[..10]), Err(FormatError::BadMagic)));
        f[8] = 99;
        assert!(matches!(parse(&f), Err(FormatError::Version(99))));
        f[0] = b'X';
        assert!(matches!(parse(&f), Err(FormatError::BadMagic)));
    }
}
