//! Live handoff of a running world to another server (issue 42; operators' page:
//! `docs/handoff.md`; the HTTP side is `http/handoff.rs`).
//!
//! What moves is a **package**: the world's stored state — its newest snapshot and its log from
//! that snapshot's base, exactly the files recovery reads ([`export_state`]) — plus the tick
//! numbering and the player sessions that use the world. The target writes the files into its
//! own store (or, without persistence, into a [`MemStore`]) and brings the world back through
//! the same recovery as after a restart ([`import_state`], `persist::recover`), so a handed-off
//! world is the one that ran, bit for bit, and goes on at the next tick.
//!
//! Package layout (little-endian): `STEERHND`, version u16, 2 zero bytes, the JSON meta's
//! length u32, the CRC-32 of everything after the header u32 (20 bytes of header), then the
//! [`PackageMeta`] JSON, then the files, each `kind u8` (1 segment, 2 snapshot), `seq u64`,
//! `len u64` and its bytes.
//!
//! **Invariant:** a package is checked whole (header, checksum, every length against what is
//! left) before anything is written, and a world whose recovery fails leaves nothing behind in
//! the target's store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::persist::{self, PersistError, Recovered, Store};
use crate::record::format;
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

/// A stored file of a world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A log segment (as stored: the recording header, then chunks).
    Segment = 1,
    /// A snapshot file.
    Snapshot = 2,
}

/// One stored file: kind, number, bytes.
pub type File = (FileKind, u64, Vec<u8>);

/// A world on its way to another server.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub meta: PackageMeta,
    pub files: Vec<File>,
}

impl Package {
    /// The bytes sent.
    pub fn encode(&self) -> Vec<u8> {
        let meta = serde_json::to_vec(&self.meta).unwrap_or_default();
        let body_len = meta.len() + self.files.iter().map(|f| 17 + f.2.len()).sum::<usize>();
        let mut out = Vec::with_capacity(HEADER + body_len);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&meta);
        for (kind, seq, bytes) in &self.files {
            out.push(*kind as u8);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
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
        let mut rest = &body[meta_len..];
        let mut files = Vec::new();
        while !rest.is_empty() {
            if rest.len() < 17 {
                return Err(bad(format!("file {}: header cut short", files.len())));
            }
            let kind = match rest[0] {
                1 => FileKind::Segment,
                2 => FileKind::Snapshot,
                k => return Err(bad(format!("file {}: unknown kind {k}", files.len()))),
            };
            let seq = u64::from_le_bytes(rest[1..9].try_into().map_err(|_| bad("seq".into()))?);
            let len = u64::from_le_bytes(rest[9..17].try_into().map_err(|_| bad("len".into()))?);
            rest = &rest[17..];
            let len = usize::try_from(len).ok().filter(|&l| l <= rest.len()).ok_or_else(|| bad(format!("file {}: {len} bytes, {} left", files.len(), rest.len())))?;
            files.push((kind, seq, rest[..len].to_vec()));
            rest = &rest[len..];
        }
        Ok(Package { meta, files })
    }
}

/// The stored state of `world` that a handoff moves: its newest readable snapshot and every
/// segment from that snapshot's base to the last (the whole log when there is no snapshot).
/// The caller has frozen the world and waited for its writer, so the log ends at the freeze.
pub fn export_state(store: &dyn Store, world: &str) -> Result<Vec<File>, HandoffError> {
    let mut files = Vec::new();
    let mut base = None;
    for seq in store.snapshots(world)?.into_iter().rev() {
        let bytes = store.read_snapshot(world, seq)?;
        if let Ok(meta) = persist::decode_snapshot(&bytes) {
            base = Some(meta.base_segment);
            files.push((FileKind::Snapshot, seq, bytes));
            break;
        }
    }
    let segs = store.segments(world)?;
    let Some(&first) = segs.first() else {
        return Err(HandoffError::Refused(format!("world `{world}` has no stored log to hand off")));
    };
    let from = base.unwrap_or(first);
    for seg in segs.into_iter().filter(|&s| s >= from) {
        files.push((FileKind::Segment, seg, store.read_segment(world, seg)?));
    }
    Ok(files)
}

/// Writes a package's files into `store` as world `world` (which must have nothing stored
/// there) and recovers the world from them, as at a restart; on failure nothing of it stays.
pub fn import_state(store: &dyn Store, world: &str, files: &[File], threads: usize) -> Result<Recovered, HandoffError> {
    if !store.segments(world)?.is_empty() || !store.snapshots(world)?.is_empty() {
        return Err(HandoffError::Refused(format!("this server has stored state of a world `{world}` already (move it away first)")));
    }
    let r = write_files(store, world, files).and_then(|()| persist::recover(store, world, threads).map_err(|e| HandoffError::Recover(e.to_string())));
    if r.is_err() {
        let _ = store.remove_world(world);
    }
    r
}

fn write_files(store: &dyn Store, world: &str, files: &[File]) -> Result<(), HandoffError> {
    for (kind, seq, bytes) in files {
        match kind {
            FileKind::Snapshot => store.put_snapshot(world, *seq, bytes)?,
            FileKind::Segment => {
                // The store writes the recording header of a new segment itself.
                if bytes.len() < format::HEADER_LEN || &bytes[..8] != format::MAGIC {
                    return Err(HandoffError::Malformed(format!("segment {seq}: not a recording (bad header)")));
                }
                store.append(world, *seq, &bytes[format::HEADER_LEN..])?;
                store.close(world, *seq);
            }
        }
    }
    Ok(())
}

/// A store in memory: where a server without persistence recovers a world handed to it (and
/// the unit tests' store). Bounded by what is put into it; dropped with it.
#[derive(Debug, Default)]
pub struct MemStore {
    worlds: Mutex<HashMap<String, MemWorld>>,
}

/// A world in a [`MemStore`]: its segments and its snapshots, by number.
type MemWorld = (BTreeMap<u64, Vec<u8>>, BTreeMap<u64, Vec<u8>>);

impl MemStore {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, MemWorld>) -> T) -> T {
        f(&mut self.worlds.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn missing(what: String) -> PersistError {
    PersistError::Io { file: what, reason: "not found".into() }
}

impl Store for MemStore {
    fn describe(&self, world: &str, seg: Option<u64>) -> String {
        match seg {
            Some(s) => format!("(handoff) {world}/seg-{s:020}.log"),
            None => format!("(handoff) {world}"),
        }
    }
    fn describe_snapshot(&self, world: &str, seq: u64) -> String {
        format!("(handoff) {world}/snap-{seq:020}.snap")
    }
    fn worlds(&self) -> Result<Vec<String>, PersistError> {
        Ok(self.with(|m| m.keys().cloned().collect()))
    }
    fn segments(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        Ok(self.with(|m| m.get(world).map(|w| w.0.keys().copied().collect()).unwrap_or_default()))
    }
    fn append(&self, world: &str, seg: u64, bytes: &[u8]) -> Result<(), PersistError> {
        self.with(|m| {
            let s = m.entry(world.to_string()).or_default().0.entry(seg).or_insert_with(|| format::header().to_vec());
            s.extend_from_slice(bytes);
        });
        Ok(())
    }
    fn sync(&self, _world: &str, _seg: u64) -> Result<(), PersistError> {
        Ok(())
    }
    fn close(&self, _world: &str, _seg: u64) {}
    fn read_segment(&self, world: &str, seg: u64) -> Result<Vec<u8>, PersistError> {
        self.with(|m| m.get(world).and_then(|w| w.0.get(&seg).cloned())).ok_or_else(|| missing(self.describe(world, Some(seg))))
    }
    fn truncate_segment(&self, world: &str, seg: u64, len: u64) -> Result<(), PersistError> {
        self.with(|m| {
            if let Some(s) = m.get_mut(world).and_then(|w| w.0.get_mut(&seg)) {
                s.truncate(usize::try_from(len).unwrap_or(usize::MAX));
            }
        });
        Ok(())
    }
    fn delete_segment(&self, world: &str, seg: u64) -> Result<(), PersistError> {
        self.with(|m| m.get_mut(world).map(|w| w.0.remove(&seg)));
        Ok(())
    }
    fn put_snapshot(&self, world: &str, seq: u64, bytes: &[u8]) -> Result<(), PersistError> {
        self.with(|m| m.entry(world.to_string()).or_default().1.insert(seq, bytes.to_vec()));
        Ok(())
    }
    fn snapshots(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        Ok(self.with(|m| m.get(world).map(|w| w.1.keys().copied().collect()).unwrap_or_default()))
    }
    fn read_snapshot(&self, world: &str, seq: u64) -> Result<Vec<u8>, PersistError> {
        self.with(|m| m.get(world).and_then(|w| w.1.get(&seq).cloned())).ok_or_else(|| missing(self.describe_snapshot(world, seq)))
    }
    fn delete_snapshot(&self, world: &str, seq: u64) -> Result<(), PersistError> {
        self.with(|m| m.get_mut(world).map(|w| w.1.remove(&seq)));
        Ok(())
    }
    fn remove_world(&self, world: &str) -> Result<(), PersistError> {
        self.with(|m| m.remove(world));
        Ok(())
    }
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
        let p = Package { meta: meta(), files: vec![(FileKind::Snapshot, 2, vec![1, 2, 3]), (FileKind::Segment, 5, vec![9; 40])] };
        let bytes = p.encode();
        assert_eq!(Package::decode(&bytes).unwrap(), p);
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(Package::decode(&flipped).unwrap_err().to_string().contains("checksum"));
        assert!(Package::decode(&bytes[..10]).unwrap_err().to_string().contains("magic"));
        // A file length past the end is refused even with a good checksum.
        let mut cut = p.clone();
        cut.files.truncate(1);
        let mut b = cut.encode();
        let n = b.len();
        b[n - 3 - 8..n - 3].copy_from_slice(&1000u64.to_le_bytes());
        let crc = crc32fast::hash(&b[HEADER..]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(Package::decode(&b).unwrap_err().to_string().contains("bytes"), "{:?}", Package::decode(&b));
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
        let src: std::sync::Arc<dyn Store> = std::sync::Arc::new(MemStore::default());
        let settings = crate::config::PersistSettings { fsync_interval_ms: 1, snapshot_every_secs: 3600, ..Default::default() };
        let writer = Writer::start(src.clone(), settings).unwrap();
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/crossing.json");
        let sc = crate::scenario::Scenario::from_file(&path).unwrap();
        let mut world = sc.build().unwrap();
        world.set_caps(1000, 100);
        let mut d = Durable::fresh(&writer, "w", &start_record(&sc, 1000, 100));
        for _ in 0..40 {
            let _ = world.step();
            d.after_step(&world, false, None);
        }
        d.snapshot(&world, false, None);
        assert!(writer.drain(std::time::Duration::from_secs(5)));
        let files = export_state(&*src, "w").unwrap();
        assert!(files.iter().any(|f| f.0 == FileKind::Snapshot) && files.iter().any(|f| f.0 == FileKind::Segment));
        let pkg = Package { meta: meta(), files };
        let back = Package::decode(&pkg.encode()).unwrap();
        let dst = MemStore::default();
        let rec = import_state(&dst, "w", &back.files, 1).unwrap();
        assert_eq!(rec.world.tick(), world.tick());
        assert_eq!(crate::sim::hash::exact_hash(&rec.world), crate::sim::hash::exact_hash(&world));
        // A second import of the same name is refused, and leaves the first one alone.
        assert!(matches!(import_state(&dst, "w", &back.files, 1), Err(HandoffError::Refused(_))));
        // A damaged segment does not become a world, and leaves nothing behind.
        let mut bad = back.files.clone();
        for f in bad.iter_mut().filter(|f| f.0 == FileKind::Segment) {
            f.2.truncate(format::HEADER_LEN - 1);
        }
        let empty = MemStore::default();
        assert!(import_state(&empty, "w", &bad, 1).is_err());
        assert!(empty.worlds().unwrap().is_empty());
    }
}
