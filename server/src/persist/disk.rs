//! The local-disk backend: one directory per world under the persistence directory,
//! `seg-<n>.log` (recording-format files, `n` 20 digits) and `snap-<n>.snap`.
//!
//! **Invariant:** no file is ever half-written where a reader looks. A snapshot is written to a
//! temp file, fsynced, renamed over its name and the directory fsynced; a segment append that
//! fails is cut back to the segment's last good length before the error is returned, so a retry
//! appends after whole chunks only.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::store::{PersistError, Store};
use crate::record::format;

/// Segments and snapshots of every durable world in one directory tree.
pub struct LocalDisk {
    dir: PathBuf,
    /// Open segments: (world, segment) → file and its good length.
    open: Mutex<HashMap<(String, u64), (File, u64)>>,
}

const SEG_PREFIX: &str = "seg-";
const SEG_EXT: &str = ".log";
const SNAP_PREFIX: &str = "snap-";
const SNAP_EXT: &str = ".snap";

fn io(path: &Path, what: &str, e: std::io::Error) -> PersistError {
    PersistError::Io { file: path.display().to_string(), reason: format!("{what}: {e}") }
}

impl LocalDisk {
    /// The backend rooted at `dir` (created if missing); stray temp files are swept.
    pub fn open(dir: &Path) -> Result<Self, PersistError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, "cannot create", e))?;
        let d = LocalDisk { dir: dir.to_path_buf(), open: Mutex::new(HashMap::new()) };
        for w in d.worlds()? {
            let wd = d.world_dir(&w);
            if let Ok(rd) = std::fs::read_dir(&wd) {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().ends_with(".tmp") {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
        Ok(d)
    }

    fn world_dir(&self, world: &str) -> PathBuf {
        self.dir.join(world)
    }

    fn seg_path(&self, world: &str, seg: u64) -> PathBuf {
        self.world_dir(world).join(format!("{SEG_PREFIX}{seg:020}{SEG_EXT}"))
    }

    fn snap_path(&self, world: &str, seq: u64) -> PathBuf {
        self.world_dir(world).join(format!("{SNAP_PREFIX}{seq:020}{SNAP_EXT}"))
    }

    fn numbered(&self, world: &str, prefix: &str, ext: &str) -> Result<Vec<u64>, PersistError> {
        let wd = self.world_dir(world);
        let rd = match std::fs::read_dir(&wd) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&wd, "cannot list", e)),
        };
        let mut out: Vec<u64> = rd
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let digits = n.strip_prefix(prefix)?.strip_suffix(ext)?.to_string();
                (digits.len() == 20).then(|| digits.parse().ok()).flatten()
            })
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), (File, u64)>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Store for LocalDisk {
    fn describe(&self, world: &str, seg: Option<u64>) -> String {
        match seg {
            Some(s) => self.seg_path(world, s).display().to_string(),
            None => self.world_dir(world).display().to_string(),
        }
    }

    fn describe_snapshot(&self, world: &str, seq: u64) -> String {
        self.snap_path(world, seq).display().to_string()
    }

    fn worlds(&self) -> Result<Vec<String>, PersistError> {
        let rd = std::fs::read_dir(&self.dir).map_err(|e| io(&self.dir, "cannot list", e))?;
        let mut out: Vec<String> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| crate::scenario::valid_name(n))
            .collect();
        out.sort();
        Ok(out)
    }

    fn segments(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        self.numbered(world, SEG_PREFIX, SEG_EXT)
    }

    fn append(&self, world: &str, seg: u64, bytes: &[u8]) -> Result<(), PersistError> {
        let path = self.seg_path(world, seg);
        let mut open = self.lock();
        let key = (world.to_string(), seg);
        if !open.contains_key(&key) {
            std::fs::create_dir_all(self.world_dir(world)).map_err(|e| io(&self.world_dir(world), "cannot create", e))?;
            let mut f = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| io(&path, "cannot open", e))?;
            let mut len = f.metadata().map_err(|e| io(&path, "cannot stat", e))?.len();
            if len == 0 {
                if let Err(e) = f.write_all(&format::header()) {
                    let _ = f.set_len(0);
                    return Err(io(&path, "cannot write the header", e));
                }
                len = format::HEADER_LEN as u64;
                sync_dir(&self.world_dir(world));
            }
            open.insert(key.clone(), (f, len));
        }
        let Some((f, good)) = open.get_mut(&key) else { return Err(io(&path, "cannot open", std::io::Error::other("not open"))) };
        match f.write_all(bytes) {
            Ok(()) => {
                *good += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Never leave a partial chunk: later chunks must follow whole ones.
                let _ = f.set_len(*good);
                Err(io(&path, "cannot append", e))
            }
        }
    }

    fn sync(&self, world: &str, seg: u64) -> Result<(), PersistError> {
        let open = self.lock();
        match open.get(&(world.to_string(), seg)) {
            Some((f, _)) => f.sync_data().map_err(|e| io(&self.seg_path(world, seg), "cannot fsync", e)),
            None => Ok(()),
        }
    }

    fn close(&self, world: &str, seg: u64) {
        if let Some((f, _)) = self.lock().remove(&(world.to_string(), seg)) {
            let _ = f.sync_data();
        }
    }

    fn read_segment(&self, world: &str, seg: u64) -> Result<Vec<u8>, PersistError> {
        let p = self.seg_path(world, seg);
        std::fs::read(&p).map_err(|e| io(&p, "cannot read", e))
    }

    fn truncate_segment(&self, world: &str, seg: u64, len: u64) -> Result<(), PersistError> {
        let p = self.seg_path(world, seg);
        self.lock().remove(&(world.to_string(), seg));
        let f = OpenOptions::new().write(true).open(&p).map_err(|e| io(&p, "cannot open", e))?;
        f.set_len(len).map_err(|e| io(&p, "cannot truncate", e))?;
        f.sync_all().map_err(|e| io(&p, "cannot fsync", e))
    }

    fn delete_segment(&self, world: &str, seg: u64) -> Result<(), PersistError> {
        let p = self.seg_path(world, seg);
        self.lock().remove(&(world.to_string(), seg));
        match std::fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&p, "cannot delete", e)),
        }
    }

    fn put_snapshot(&self, world: &str, seq: u64, bytes: &[u8]) -> Result<(), PersistError> {
        let wd = self.world_dir(world);
        std::fs::create_dir_all(&wd).map_err(|e| io(&wd, "cannot create", e))?;
        let path = self.snap_path(world, seq);
        let tmp = wd.join(format!("{SNAP_PREFIX}{seq:020}{SNAP_EXT}.tmp"));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            sync_dir(&wd);
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(&path, "cannot write", e)
        })
    }

    fn snapshots(&self, world: &str) -> Result<Vec<u64>, PersistError> {
        self.numbered(world, SNAP_PREFIX, SNAP_EXT)
    }

    fn read_snapshot(&self, world: &str, seq: u64) -> Result<Vec<u8>, PersistError> {
        let p = self.snap_path(world, seq);
        std::fs::read(&p).map_err(|e| io(&p, "cannot read", e))
    }

    fn delete_snapshot(&self, world: &str, seq: u64) -> Result<(), PersistError> {
        let p = self.snap_path(world, seq);
        match std::fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&p, "cannot delete", e)),
        }
    }

    fn remove_world(&self, world: &str) -> Result<(), PersistError> {
        self.lock().retain(|(w, _), _| w != world);
        let wd = self.world_dir(world);
        match std::fs::remove_dir_all(&wd) {
            Ok(()) => {
                sync_dir(&self.dir);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(&wd, "cannot delete", e)),
        }
    }
}

/// A durable world's directory as `steerd replay DIR` re-runs it: the world to start from (none
/// when the log begins with its `Start`), and the records after it.
pub struct LogDir {
    /// The oldest snapshot's world and scenario whose place is in the log (segments before
    /// a snapshot are pruned, so the log alone no longer starts from a scenario).
    pub from: Option<(crate::sim::world::World, crate::scenario::Scenario)>,
    /// The snapshot it came from.
    pub snapshot: Option<String>,
    /// The records to re-run.
    pub parsed: format::Parsed,
}

/// Reads a durable world's directory for `steerd replay DIR`: its segments in order (each must
/// be there), records concatenated; a torn tail of the last segment is reported as the
/// recording's torn tail, damage anywhere else is an error naming the file. When the first
/// segment does not begin with a `Start`, the oldest valid snapshot whose place is in the log
/// is the start, and the records after it are re-run. Writes nothing.
pub fn read_log_dir(dir: &Path) -> Result<LogDir, PersistError> {
    let rd = std::fs::read_dir(dir).map_err(|e| io(dir, "cannot list", e))?;
    let mut segs: Vec<(u64, PathBuf)> = Vec::new();
    let mut snaps: Vec<(u64, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let num = |p: &str, x: &str| n.strip_prefix(p)?.strip_suffix(x).filter(|d| d.len() == 20)?.parse::<u64>().ok();
        if let Some(v) = num(SEG_PREFIX, SEG_EXT) {
            segs.push((v, e.path()));
        } else if let Some(v) = num(SNAP_PREFIX, SNAP_EXT) {
            snaps.push((v, e.path()));
        }
    }
    segs.sort();
    snaps.sort();
    let Some(first) = segs.first().map(|s| s.0) else {
        return Err(io(dir, "no segment", std::io::Error::other("seg-*.log not found")));
    };
    let mut out = format::Parsed::default();
    // Records before each segment.
    let mut starts: Vec<(u64, usize)> = Vec::new();
    let last = segs.len() - 1;
    for (i, (n, path)) in segs.iter().enumerate() {
        if *n != first + i as u64 {
            return Err(PersistError::Io { file: dir.join(format!("{SEG_PREFIX}{:020}{SEG_EXT}", first + i as u64)).display().to_string(), reason: "missing segment".into() });
        }
        starts.push((*n, out.records.len()));
        let bytes = std::fs::read(path).map_err(|e| io(path, "cannot read", e))?;
        if i == last && bytes.len() < format::HEADER_LEN {
            out.torn_bytes = bytes.len();
            out.torn_reason = Some(format!("{}: header cut short", path.display()));
            break;
        }
        let p = format::parse(&bytes).map_err(|e| PersistError::Io { file: path.display().to_string(), reason: e.to_string() })?;
        if let Some(r) = p.torn_reason {
            if i != last {
                return Err(PersistError::Io { file: path.display().to_string(), reason: format!("damaged before its end: {r}") });
            }
            out.torn_bytes = p.torn_bytes;
            out.torn_reason = Some(format!("{}: {r}", path.display()));
        }
        out.chunks += p.chunks;
        out.records.extend(p.records);
    }
    if matches!(out.records.first(), Some(format::Record::Start { .. })) {
        return Ok(LogDir { from: None, snapshot: None, parsed: out });
    }
    let mut why = Vec::new();
    for (_, path) in &snaps {
        let Ok(bytes) = std::fs::read(path) else { continue };
        let s = match super::decode_snapshot(&bytes) {
            Ok(s) => s,
            Err(e) => {
                why.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let Some(world) = s.world else { continue };
        let Some(&(_, before)) = starts.iter().find(|x| x.0 == s.meta.segment) else { continue };
        let at = before.saturating_add(usize::try_from(s.meta.records).unwrap_or(usize::MAX));
        if at > out.records.len() {
            continue;
        }
        match super::recover::restore(&s.meta, world) {
            Ok((w, scenario, _)) => {
                out.records.drain(..at);
                return Ok(LogDir { from: Some((w, scenario)), snapshot: Some(path.display().to_string()), parsed: out });
            }
            Err(e) => why.push(format!("{}: {e}", path.display())),
        }
    }
    Err(PersistError::Io {
        file: segs[0].1.display().to_string(),
        reason: format!("the log does not begin with a start record and no snapshot in the directory starts it ({})", if why.is_empty() { "none covers its first segment".to_string() } else { why.join("; ") }),
    })
}
