//! Moving a durable world between servers: [`export_world`] packs what recovery needs — the
//! kept snapshots and the log segments they need (pruning leaves no other) — into one buffer;
//! [`import_world`] unpacks it into any [`Store`] (the target's disk, or a [`super::mem::MemStore`]),
//! from which [`super::recover`] restores the world exactly as after a restart: newest valid
//! snapshot, then the log's tail, every checkpoint compared.
//!
//! The buffer: `STEERXFR`, version u16 LE, 2 zero bytes, the count of files u32 LE; per file a
//! kind byte (1 segment, 2 snapshot), its number u64 LE, its length u32 LE and its bytes; then
//! the CRC-32 of everything before it, u32 LE. Segments and snapshots keep their own framing
//! and checksums inside.

use super::store::{PersistError, Store};

/// First 8 bytes of an exported world.
pub const XFER_MAGIC: &[u8; 8] = b"STEERXFR";
/// Export format version.
pub const XFER_VERSION: u16 = 1;
/// Most files an export may hold (a world keeps two snapshots and the segments after the older).
pub const XFER_MAX_FILES: usize = 1 << 16;

const KIND_SEGMENT: u8 = 1;
const KIND_SNAPSHOT: u8 = 2;

/// Why an export could not be imported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransferError {
    /// The buffer is not a whole export.
    #[error("exported world is malformed: {0}")]
    Malformed(String),
    /// The target store failed.
    #[error(transparent)]
    Store(#[from] PersistError),
}

/// Packs `world`'s stored state. Call it once the world's writer has drained (its last chunk and
/// snapshot are in the store): the export is then the world at its last record.
pub fn export_world(store: &dyn Store, world: &str) -> Result<Vec<u8>, PersistError> {
    let mut files: Vec<(u8, u64, Vec<u8>)> = Vec::new();
    for seq in store.snapshots(world)? {
        files.push((KIND_SNAPSHOT, seq, store.read_snapshot(world, seq)?));
    }
    for seg in store.segments(world)? {
        files.push((KIND_SEGMENT, seg, store.read_segment(world, seg)?));
    }
    let mut out = Vec::with_capacity(16 + files.iter().map(|f| 13 + f.2.len()).sum::<usize>() + 4);
    out.extend_from_slice(XFER_MAGIC);
    out.extend_from_slice(&XFER_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (kind, n, bytes) in &files {
        out.push(*kind);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Unpacks an export into `store` under `world` (whatever was stored under that name is
/// replaced). Checked whole before anything is written: a malformed buffer changes nothing.
pub fn import_world(store: &dyn Store, world: &str, bytes: &[u8]) -> Result<(), TransferError> {
    let bad = |w: &str| TransferError::Malformed(w.to_string());
    if bytes.len() < 20 || &bytes[..8] != XFER_MAGIC {
        return Err(bad("bad magic"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(bad("checksum mismatch"));
    }
    let version = u16::from_le_bytes([body[8], body[9]]);
    if version != XFER_VERSION {
        return Err(TransferError::Malformed(format!("version {version} is not supported (this build reads {XFER_VERSION})")));
    }
    let count = u32::from_le_bytes([body[12], body[13], body[14], body[15]]) as usize;
    if count > XFER_MAX_FILES {
        return Err(TransferError::Malformed(format!("{count} files, more than {XFER_MAX_FILES}")));
    }
    let mut at = 16;
    let mut files: Vec<(u8, u64, &[u8])> = Vec::with_capacity(count.min(1024));
    for i in 0..count {
        let head = body.get(at..at + 13).ok_or_else(|| TransferError::Malformed(format!("file {i}: cut short")))?;
        let kind = head[0];
        let mut n = [0u8; 8];
        n.copy_from_slice(&head[1..9]);
        let len = u32::from_le_bytes([head[9], head[10], head[11], head[12]]) as usize;
        let data = body.get(at + 13..at + 13 + len).ok_or_else(|| TransferError::Malformed(format!("file {i}: cut short")))?;
        if kind != KIND_SEGMENT && kind != KIND_SNAPSHOT {
            return Err(TransferError::Malformed(format!("file {i}: kind {kind}")));
        }
        files.push((kind, u64::from_le_bytes(n), data));
        at += 13 + len;
    }
    if at != body.len() {
        return Err(bad("bytes after the last file"));
    }
    store.remove_world(world)?;
    for (kind, n, data) in files {
        if kind == KIND_SNAPSHOT {
            store.put_snapshot(world, n, data)?;
        } else {
            // Segments are stored with their header; `append` adds one to a new segment.
            let chunks = data.get(crate::record::format::HEADER_LEN..).unwrap_or_default();
            store.append(world, n, chunks)?;
            store.close(world, n);
        }
    }
    Ok(())
}
