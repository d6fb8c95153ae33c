//! The storage interface durable worlds are written through.

/// Why the store could not do something.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PersistError {
    /// A file operation failed (names the file).
    #[error("{file}: {reason}")]
    Io { file: String, reason: String },
}

/// Where durable worlds keep their logs and snapshots. The local disk is the embedded default;
/// a replicated backend (e.g. NATS JetStream: a stream per world for the segments, a KV bucket
/// for the snapshots) implements the same calls (ARCHITECTURE.md). Only the writer thread and
/// recovery call it, never a world thread.
pub trait Store: Send + Sync {
    /// A segment's (or, with `None`, the world's) location, for errors and reports.
    fn describe(&self, world: &str, seg: Option<u64>) -> String;
    /// A snapshot's location.
    fn describe_snapshot(&self, world: &str, seq: u64) -> String;
    /// The worlds with anything stored.
    fn worlds(&self) -> Result<Vec<String>, PersistError>;
    /// A world's segment numbers, ascending.
    fn segments(&self, world: &str) -> Result<Vec<u64>, PersistError>;
    /// Appends whole chunks to a segment (created with the recording header if new). On error
    /// the segment is as it was before the call.
    fn append(&self, world: &str, seg: u64, bytes: &[u8]) -> Result<(), PersistError>;
    /// Makes everything appended to a segment durable.
    fn sync(&self, world: &str, seg: u64) -> Result<(), PersistError>;
    /// No more appends to this segment (syncs it).
    fn close(&self, world: &str, seg: u64);
    /// A segment's bytes.
    fn read_segment(&self, world: &str, seg: u64) -> Result<Vec<u8>, PersistError>;
    /// Cuts a segment to `len` bytes (a torn tail).
    fn truncate_segment(&self, world: &str, seg: u64, len: u64) -> Result<(), PersistError>;
    /// Deletes a segment (absent: no error).
    fn delete_segment(&self, world: &str, seg: u64) -> Result<(), PersistError>;
    /// Writes a snapshot atomically: afterwards it is there whole, or not at all.
    fn put_snapshot(&self, world: &str, seq: u64, bytes: &[u8]) -> Result<(), PersistError>;
    /// A world's snapshot numbers, ascending.
    fn snapshots(&self, world: &str) -> Result<Vec<u64>, PersistError>;
    /// A snapshot's bytes.
    fn read_snapshot(&self, world: &str, seq: u64) -> Result<Vec<u8>, PersistError>;
    /// Deletes a snapshot (absent: no error).
    fn delete_snapshot(&self, world: &str, seq: u64) -> Result<(), PersistError>;
    /// Deletes everything of a world.
    fn remove_world(&self, world: &str) -> Result<(), PersistError>;
}
