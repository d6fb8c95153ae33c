//! An in-memory [`Store`]: what a world moved between servers is imported into (and recovered
//! from, through the same [`super::recover`] as a restart), and the tests' store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::store::{PersistError, Store};
use crate::record::format;

/// One world's files.
#[derive(Debug, Default, Clone)]
struct Files {
    segments: BTreeMap<u64, Vec<u8>>,
    snapshots: BTreeMap<u64, Vec<u8>>,
}

/// Segments and snapshots in memory (bounded by what is put in: a world's log is pruned as on
/// disk once a snapshot covers it).
#[derive(Debug, Default)]
pub struct MemStore {
    worlds: Mutex<HashMap<String, Files>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore::default()
    }

    fn with<T>(&self, world: &str, f: impl FnOnce(&mut Files) -> T) -> T {
        let mut g = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        f(g.entry(world.to_string()).or_default())
    }

    fn read<T>(&self, world: &str, f: impl FnOnce(Option<&Files>) -> T) -> T {
        let g = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        f(g.get(world))
    }
}

fn missing(what: String) -> PersistError {
    PersistError::Io { file: what, reason: "not found".into() }
}

impl Store for MemStore {
    fn describe(&self, world: &str, seg: Option<u64>) -> String {
        match seg {
            Some(s) => format!("mem:{world}/seg-{s:020}.log"),
            None => format!("mem:{world}"),
        }
    }
    fn describe_snapshot(&self, world: &str, seq: u64) -> String {
        format!("mem:{world}/snap-{seq:020}.snap")
    }
    fn worlds(&self) -> Result<Vec<String>, PersistError> {
        let g = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<String> = g.iter().filter(|(_, f)| !f.segments.is_empty() || !f.snapshots.is_empty()).map(|(k, _)| k.clone()).collect();
        v.sort();
        Ok(v)
    }
    fn segments(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        Ok(self.read(world, |f| f.map(|f| f.segments.keys().copied().collect()).unwrap_or_default()))
    }
    fn append(&self, world: &str, seg: u64, bytes: &[u8]) -> Result<(), PersistError> {
        self.with(world, |f| f.segments.entry(seg).or_insert_with(|| format::header().to_vec()).extend_from_slice(bytes));
        Ok(())
    }
    fn sync(&self, _: &str, _: u64) -> Result<(), PersistError> {
        Ok(())
    }
    fn close(&self, _: &str, _: u64) {}
    fn read_segment(&self, world: &str, seg: u64) -> Result<Vec<u8>, PersistError> {
        self.read(world, |f| f.and_then(|f| f.segments.get(&seg).cloned())).ok_or_else(|| missing(self.describe(world, Some(seg))))
    }
    fn truncate_segment(&self, world: &str, seg: u64, len: u64) -> Result<(), PersistError> {
        self.with(world, |f| {
            if let Some(s) = f.segments.get_mut(&seg) {
                s.truncate(usize::try_from(len).unwrap_or(usize::MAX));
            }
        });
        Ok(())
    }
    fn delete_segment(&self, world: &str, seg: u64) -> Result<(), PersistError> {
        self.with(world, |f| f.segments.remove(&seg));
        Ok(())
    }
    fn put_snapshot(&self, world: &str, seq: u64, bytes: &[u8]) -> Result<(), PersistError> {
        self.with(world, |f| f.snapshots.insert(seq, bytes.to_vec()));
        Ok(())
    }
    fn snapshots(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        Ok(self.read(world, |f| f.map(|f| f.snapshots.keys().copied().collect()).unwrap_or_default()))
    }
    fn read_snapshot(&self, world: &str, seq: u64) -> Result<Vec<u8>, PersistError> {
        self.read(world, |f| f.and_then(|f| f.snapshots.get(&seq).cloned())).ok_or_else(|| missing(self.describe_snapshot(world, seq)))
    }
    fn delete_snapshot(&self, world: &str, seq: u64) -> Result<(), PersistError> {
        self.with(world, |f| f.snapshots.remove(&seq));
        Ok(())
    }
    fn remove_world(&self, world: &str) -> Result<(), PersistError> {
        let mut g = self.worlds.lock().unwrap_or_else(|p| p.into_inner());
        g.remove(world);
        Ok(())
    }
}
