//! Live handoff of a running world to another server (issue 42; operators' page:
//! `docs/handoff.md`; the HTTP side is `http/handoff.rs`).
//!
//! What moves is a **package**: the world's stored state — its snapshots (the newest taken at
//! the freeze: the world itself) and the log they need, as `persist::transfer::export_world`
//! packs them ([`export_state`]) — plus the tick numbering and the player sessions that use the
//! world. The target unpacks it into its own store and brings the world back through the same
//! recovery as after a restart ([`import_state`], `persist::recover`), so a handed-off world is
//! the one that ran, bit for bit, and goes on at the next tick.
//!
//! Package layout (little-endian): `STEERHND`, version u16, 2 zero bytes, the JSON meta's
//! length u32, the CRC-32 of everything after the header u32 (20 bytes of header), then the
//! [`PackageMeta`] JSON, then the export.
//!
//! **Invariant:** a package is checked whole (header, checksum, every length against what is
//! left) before anything is written, and a world whose recovery fails leaves nothing behind in
//! the target's store.

use serde::{Deserialize, Serialize};

use crate::persist::{self, PersistError, Recovered, Store};
use crate::runtime::players::MovedSession;

/// First 8 bytes of a package.
pub const MAGIC: &[u8; 8] = b"STEERHND";
/// Package format version.
pub const VERSION: u16 = 1;
/// Header length.
pub const HEADER: usize = 20;
/// The header carrying the cluster secret on server-to-server calls.
pub const SECRET_HEADER: &str = "x-steerd-cluster-secret";

/// Why a handoff could not be packed, read or imported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandoffError {
    /// The package is malformed (says where).
    #[error("handoff package: {0}")]
    Malformed(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] PersistError),
    /// The world cannot be handed off (says why).
    #[error("{0}")]
    Refused(String),
    /// The world's state did not recover from the package.
    #[error("the handed-off world did not recover: {0}")]
    Recover(String),
}

/// What a package says besides its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageMeta {
    /// The world's name.
    pub world: String,
    /// The sim tick it was frozen at, and the wire tick's offset (the wire tick is the sum).
    pub tick: u64,
    pub tick_offset: u64,
    /// `state_hash` at `tick` (hex), which the target's recovered world must have.
    pub state_hash: String,
    /// The sessions that use the world.
    pub sessions: Vec<MovedSession>,
}

/// A world on its way to another server.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub meta: PackageMeta,
    /// The world's stored state (`persist::transfer::export_world`).
    pub state: Vec<u8>,
}

impl Package {
    /// The bytes sent.
    pub fn encode(&self) -> Vec<u8> {
        let meta = serde_json::to_vec(&self.meta).unwrap_or_default();
        let mut out = Vec::with_capacity(HEADER + meta.len() + self.state.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&meta);
        out.extend_from_slice(&self.state);
        let crc = crc32fast::hash(&out[HEADER..]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a package; the error says what is wrong with it.
    pub fn decode(bytes: &[u8]) -> Result<Package, HandoffError> {
        let bad = |m: String| HandoffError::Malformed(m);
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return Err(bad("not a steerd handoff package (bad magic)".into()));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != VERSION {
            return Err(bad(format!("version {version} is not supported (this build reads {VERSION})")));
        }
        let meta_len = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
        let crc = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        let body = &bytes[HEADER..];
        if crc32fast::hash(body) != crc {
            return Err(bad("checksum mismatch".into()));
        }
        if meta_len > body.len() {
            return Err(bad(format!("meta of {meta_len} bytes, {} left", body.len())));
        }
        let meta: PackageMeta = serde_json::from_slice(&body[..meta_len]).map_err(|e| bad(format!("meta: {e}")))?;
        Ok(Package { meta, state: body[meta_len..].to_vec() })
    }
}

/// The stored state of `world` that a handoff moves (`persist::transfer::export_world`). The
/// caller has frozen the world (which queued a snapshot at the freeze) and waited for its
/// writer, so the export is the world at the freeze.
pub fn export_state(store: &dyn Store, world: &str) -> Result<Vec<u8>, HandoffError> {
    if store.segments(world)?.is_empty() {
        return Err(HandoffError::Refused(format!("world `{world}` has no stored log to hand off")));
    }
    Ok(persist::transfer::export_world(store, world)?)
}

/// Unpacks an export into `store` as world `world` (which must have nothing stored there) and
/// recovers the world from it, as at a restart; on failure nothing of it stays.
pub fn import_state(store: &dyn Store, world: &str, state: &[u8], threads: usize) -> Result<Recovered, HandoffError> {
    if !store.segments(world)?.is_empty() || !store.snapshots(world)?.is_empty() {
        return Err(HandoffError::Refused(format!("this server has stored state of a world `{world}` already (move it away first)")));
    }
    let r = persist::transfer::import_world(store, world, state)
        .map_err(|e| HandoffError::Malformed(e.to_string()))
        .and_then(|()| persist::recover(store, world, threads).map_err(|e| HandoffError::Recover(e.to_string())));
    if r.is_err() {
        let _ = store.remove_world(world);
    }
    r
}

/// True if `given` is the cluster secret `secret`: their SHA-256 digests compared in constant
/// time (neither content nor length shows in the time taken).
pub fn secret_matches(secret: &str, given: &str) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let a = Sha256::digest(secret.as_bytes());
    let b = Sha256::digest(given.as_bytes());
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

/// The WebSocket URL clients reach a steerd at, from its base URL (`http://h:p` →
/// `ws://h:p/ws`); a `ws://` or `wss://` URL is taken as it is.
pub fn client_url(base: &str) -> Result<String, String> {
    let b = base.trim_end_matches('/');
    if b.starts_with("ws://") || b.starts_with("wss://") {
        return Ok(b.to_string());
    }
    if let Some(rest) = b.strip_prefix("http://") {
        return Ok(format!("ws://{rest}/ws"));
    }
    if let Some(rest) = b.strip_prefix("https://") {
        return Ok(format!("wss://{rest}/ws"));
    }
    Err(format!("`{base}` is not an http://, https://, ws:// or wss:// URL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> PackageMeta {
        PackageMeta { world: "w".into(), tick: 7, tick_offset: 3, state_hash: "00ff".into(), sessions: Vec::new() }
    }

    #[test]
    fn packages_round_trip_and_damage_is_named() {
        let p = Package { meta: meta(), state: vec![9; 40] };
        let bytes = p.encode();
        assert_eq!(Package::decode(&bytes).unwrap(), p);
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(Package::decode(&flipped).unwrap_err().to_string().contains("checksum"));
        assert!(Package::decode(&bytes[..10]).unwrap_err().to_string().contains("magic"));
        // A meta length past the end is refused even with a good checksum.
        let mut b = bytes.clone();
        b[12..16].copy_from_slice(&100_000u32.to_le_bytes());
        let crc = crc32fast::hash(&b[HEADER..]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(Package::decode(&b).unwrap_err().to_string().contains("left"), "{:?}", Package::decode(&b));
    }

    #[test]
    fn secrets_and_urls() {
        assert!(secret_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!secret_matches("0123456789abcdef", "0123456789abcdeF"));
        assert!(!secret_matches("0123456789abcdef", ""));
        assert_eq!(client_url("http://10.0.0.7:8080/").unwrap(), "ws://10.0.0.7:8080/ws");
        assert_eq!(client_url("https://a.example").unwrap(), "wss://a.example/ws");
        assert_eq!(client_url("wss://a.example/ws").unwrap(), "wss://a.example/ws");
        assert!(client_url("ftp://x").is_err());
    }

    #[test]
    fn a_world_exported_from_one_store_recovers_from_another() {
        use crate::persist::{Durable, Writer, start_record};
        let src: std::sync::Arc<dyn Store> = std::sync::Arc::new(crate::persist::mem::MemStore::default());
        let settings = crate::config::PersistSettings { fsync_interval_ms: 1, snapshot_every_secs: 3600, ..Default::default() };
        let writer = Writer::start(src.clone(), settings).unwrap();
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/crossing.json");
        let sc = crate::scenario::Scenario::from_file(&path).unwrap();
        let mut world = sc.build().unwrap();
        world.set_caps(1000, 100);
        let mut d = Durable::fresh(&writer, "w", &start_record(&sc, 1000, 100));
        for _ in 0..40 {
            let _ = world.step();
            d.after_step(&world);
        }
        let runner = crate::persist::RunnerState { scenario: serde_json::to_string(&sc).unwrap(), max_agents: 1000, max_spawn: 100, owners: Vec::new(), sessions: Vec::new() };
        d.snapshot(&world, false, None, runner);
        assert!(writer.drain(std::time::Duration::from_secs(5)));
        let state = export_state(&*src, "w").unwrap();
        let pkg = Package { meta: meta(), state };
        let back = Package::decode(&pkg.encode()).unwrap();
        let dst = crate::persist::mem::MemStore::default();
        let rec = import_state(&dst, "w", &back.state, 1).unwrap();
        assert_eq!(rec.world.tick(), world.tick());
        assert_eq!(crate::sim::hash::exact_hash(&rec.world), crate::sim::hash::exact_hash(&world));
        // A second import of the same name is refused, and leaves the first one alone.
        assert!(matches!(import_state(&dst, "w", &back.state, 1), Err(HandoffError::Refused(_))));
        // A damaged export does not become a world, and leaves nothing behind.
        let mut bad = back.state.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x5a;
        let empty = crate::persist::mem::MemStore::default();
        assert!(import_state(&empty, "w", &bad, 1).is_err());
        assert!(empty.worlds().unwrap().is_empty());
    }
}
